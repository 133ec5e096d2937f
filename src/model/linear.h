// A linear layer's product x W^T + b whose float CPU products may run on oneDNN.
//
// LibTorch 1.13 sends every float linear product to the BLAS (OpenBLAS here). oneDNN's sgemm, in
// the same process (Debian's LibTorch links it), measured 1.0-1.3x faster on the model's products
// with an inner size up to 512 (the forward products of the 256-wide layers, the input gradient
// of the feed-forward's second layer) and slower on the others, with AVX-512 and with AVX2 alike
// (docs/performance.md). So a float CPU layer runs as one autograd node that hands each of its
// products to the library util/blas.h's onednn_takes() names: the forward x W^T and the input
// gradient g W one by one, the weight gradient g^T x always to the BLAS (oneDNN lost there by up
// to 2x). Both libraries split a product the same way at every call for a fixed thread count, so
// training stays bit-exact on resume. Everything else (CUDA, other dtypes, no oneDNN in the
// process, NMT_GEMM=blas) is torch::nn::functional::linear.
//
// With precision bf16 on the CPU (Bf16ProductsGuard), every float CPU layer runs as that node and
// its three products take bfloat16 inputs (x, W and the output gradient, rounded to nearest even)
// with float accumulation and outputs, by oneDNN's bf16 GEMM: about twice sgemm's rate on CPUs
// with AVX512-BF16. Weights, Adam's state, activations, norms, attention and the loss stay float.
#pragma once

#include <torch/torch.h>

namespace nmt {

// x [..., in] W^T [in, out] + b [out] (b may be undefined).
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias = {});

// The layer's own weight and bias.
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x);

// A contiguous bfloat16 copy of a float CPU tensor, rounded to nearest even on all threads: for
// finite values the bits of ATen's .to(kBFloat16), faster. With column sums: g [m, n] contiguous,
// its copy and, in the same pass, *sums [n] = g.sum(0) (a bias's gradient; summed in blocks of
// fixed rows, so the same bits at every thread count). For the node's products and tests.
torch::Tensor to_bf16(const torch::Tensor& t);
torch::Tensor to_bf16_with_column_sums(const torch::Tensor& g, torch::Tensor* sums);

// Whether float CPU layers called on this thread multiply in bfloat16 (a layer's backward follows
// its forward's choice, on whichever thread it runs).
bool bf16_products();

// bfloat16 products for the guard's lifetime on this thread (AutocastGuard sets it for precision
// bf16 on the CPU). Requires have_bf16_gemm() (util/blas.h).
class Bf16ProductsGuard {
 public:
  Bf16ProductsGuard();
  ~Bf16ProductsGuard();
  Bf16ProductsGuard(const Bf16ProductsGuard&) = delete;
  Bf16ProductsGuard& operator=(const Bf16ProductsGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace nmt
