// Which kernels LibTorch's float products (sgemm) run on.
//
// Debian's OpenBLAS (0.3.21, a dynamic-architecture build) chooses its kernel set once, when it
// loads: the CPU's own (Cooperlake on the AVX-512 EPYC machines nmt is measured on), or the one
// OPENBLAS_CORETYPE names. An environment that names an AVX2 core (these machines set
// OPENBLAS_CORETYPE=Haswell) costs training 1.3-1.6x here (docs/performance.md). So main() calls
// select_blas_kernels() first. NMT_BLAS_CORE says what it does:
//   auto (or unset)  when the CPU and the OS support AVX-512 (F, CD, BW, DQ, VL) and OpenBLAS
//                    loaded a core without it, use AVX-512 kernels (Cooperlake's with AVX512-BF16,
//                    else SkylakeX's); else change nothing
//   keep             keep OpenBLAS's choice, OPENBLAS_CORETYPE included
//   <core>           that OpenBLAS core (Haswell, SkylakeX, Cooperlake, ...)
// A change makes OpenBLAS choose its kernel table again, in this process, before any product
// runs. Other BLAS libraries, and OpenBLAS builds for one architecture, are left alone.
#pragma once

#include <cstdint>
#include <string>

namespace nmt {

// Whether the CPU and the OS support AVX-512 F, CD, BW, DQ and VL (what "auto" asks for).
bool cpu_has_avx512();

// Call before any BLAS product runs (first in main): the kernel table must not change mid-product.
void select_blas_kernels();

// For the log, e.g. "OpenBLAS 0.3.21, Cooperlake kernels (chosen by nmt for AVX-512 over
// OPENBLAS_CORETYPE=Haswell; NMT_BLAS_CORE=keep keeps that)".
std::string blas_description();

// Whether the process has a BLAS sgemm_ (the Fortran symbol LibTorch's own CPU products call):
// the condition for sgemm_row_major.
bool have_sgemm();

// C = alpha op(A) op(B) + beta C for row-major float matrices, op(A) m x k and op(B) k x n, each
// stored with its leading dimension (elements between rows), by the process's sgemm_: for
// kernels that multiply many small blocks in their own parallel loop (inside one, OpenBLAS and
// MKL run each product on the calling thread). Requires have_sgemm().
void sgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                     int64_t ldc);

// Which library multiplies a float linear layer's forward and backward-data products on the CPU
// (model/linear.h). NMT_GEMM says:
//   auto (or unset)  oneDNN's dnnl_sgemm for products A op(B) with an inner size k <= 512, the
//                    BLAS for the rest: there oneDNN measured 1.0-1.3x OpenBLAS on the model's
//                    shapes, with AVX-512 and with AVX2 alike, and at larger k and for the
//                    weight gradient (A transposed) it lost by up to 2x (docs/performance.md)
//   blas             the BLAS (LibTorch's own products) for all
//   onednn           oneDNN for every A op(B), any k
// oneDNN is the libdnnl.so.2 that Debian's LibTorch loads (it picks its kernels for the CPU at
// run time); a process without dnnl_sgemm uses the BLAS (pip's CUDA LibTorch links oneDNN
// statically; whether it exports the symbol was not checked).
// An unknown NMT_GEMM is an error, raised by the first call of either function below.
bool onednn_takes(int64_t m, int64_t n, int64_t k);

// For the log, e.g. "oneDNN 2.6.3 for the linear layers' forward and input-gradient products with
// an inner size up to 512, the BLAS for the rest (NMT_GEMM=auto)".
std::string gemm_policy_description();

// What train, translate and eval log on the CPU: blas_description(), then the policy, or with
// bf16_products (precision bf16) the bfloat16 GEMM the linear layers use instead.
std::string gemm_backend_description(bool bf16_products = false);

// C = alpha A op(B) + beta C, row-major as sgemm_row_major, by oneDNN's dnnl_sgemm (on its own
// OpenMP threads). Requires onednn_takes() to have said yes; beta 0 does not read C.
void onednn_sgemm_row_major(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                            const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                            float* c, int64_t ldc);

// Whether float products may run in bfloat16 here (precision bf16 on the CPU): the CPU multiplies
// bfloat16 natively (AVX512-BF16) and the process has oneDNN's dnnl_gemm_bf16bf16f32. Without
// the instructions oneDNN would emulate them, slower than float.
bool have_bf16_gemm();

// Why have_bf16_gemm() is false, for error messages; empty when it is true.
std::string bf16_gemm_missing();

// C = alpha op(A) op(B) + beta C, row-major as sgemm_row_major, with A and B in bfloat16 (raw
// bits, as torch::kBFloat16 stores them) and C in float: oneDNN accumulates in float. Requires
// have_bf16_gemm(); beta 0 does not read C.
void onednn_bf16_gemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                float alpha, const uint16_t* a, int64_t lda, const uint16_t* b,
                                int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace nmt
