#include "util/blas.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>
#include <optional>

#include "util/test_hooks.h"
#include "util/util.h"

namespace nmt {
namespace {

using StringFn = char* (*)();
using VoidFn = void (*)();

// A function of any library loaded in the process (OpenBLAS's, the BLAS's sgemm_, oneDNN's), or
// null.
template <typename Fn>
Fn process_function(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
}

// Cooperlake's kernel set where the CPU has AVX512-BF16 (it measured 5-7 % faster than SkylakeX
// in training on an EPYC that has it), else SkylakeX's.
const char* avx512_core() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512bf16")) return "Cooperlake";
#endif
  return "SkylakeX";
}

bool is_avx512_core(const char* core) {
  for (const char* name : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (strcasecmp(core, name) == 0) return true;
  return false;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// What the kernels replaced: OPENBLAS_CORETYPE's value then ("" = unset); empty optional = none.
std::optional<std::string>& replaced_over() {
  static std::optional<std::string> before;
  return before;
}

}  // namespace

bool cpu_has_avx512() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // libgcc's checks include the OS saving the AVX-512 register state (XCR0).
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

void select_blas_kernels() {
  const auto corename = process_function<StringFn>("openblas_get_corename");
  const auto dynamic_init = process_function<VoidFn>("gotoblas_dynamic_init");
  const auto dynamic_quit = process_function<VoidFn>("gotoblas_dynamic_quit");
  // Not OpenBLAS, or a build for one architecture: nothing to choose.
  if (corename == nullptr || dynamic_init == nullptr || dynamic_quit == nullptr) return;
  const char* core = corename();
  if (core == nullptr) return;
  const std::string policy = env_or_empty("NMT_BLAS_CORE");
  std::string target;
  if (policy.empty() || policy == "auto") {
    if (!cpu_has_avx512() || is_avx512_core(core)) return;
    target = avx512_core();
  } else if (policy == "keep" || strcasecmp(policy.c_str(), core) == 0) {
    return;
  } else {
    target = policy;
  }
  // OpenBLAS's dynamic build picks its kernel table in gotoblas_dynamic_init (from
  // OPENBLAS_CORETYPE, else the CPU) and sizes its blocking there; quit only forgets the table.
  // Nothing has multiplied yet, so choosing again here is what loading with the variable set
  // would have done, without executing the program twice (which cost ~0.6 s a command).
  const std::string before = env_or_empty("OPENBLAS_CORETYPE");
  if (::setenv("OPENBLAS_CORETYPE", target.c_str(), 1) != 0) return;
  dynamic_quit();
  dynamic_init();  // an unknown name falls back to OpenBLAS's own detection
  // Child processes (data-parallel ranks) inherit the user's environment and choose again.
  if (before.empty())
    ::unsetenv("OPENBLAS_CORETYPE");
  else
    ::setenv("OPENBLAS_CORETYPE", before.c_str(), 1);
  replaced_over() = before;
}

std::string blas_description() {
  const auto corename = process_function<StringFn>("openblas_get_corename");
  if (corename == nullptr) return "a BLAS without OpenBLAS's query functions";
  std::string out = "OpenBLAS";
  if (const auto config = process_function<StringFn>("openblas_get_config")) {
    // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64": take the version.
    const std::string c = config();
    const size_t from = c.find(' ');
    if (from != std::string::npos)
      out += " " + c.substr(from + 1, c.find(' ', from + 1) - from - 1);
  }
  const char* core = corename();
  out += std::string(", ") + (core != nullptr ? core : "unknown") + " kernels";
  const std::string policy = env_or_empty("NMT_BLAS_CORE");
  if (const auto& replaced = replaced_over()) {
    const std::string before =
        replaced->empty() ? "OpenBLAS's own choice" : "OPENBLAS_CORETYPE=" + *replaced;
    out += policy.empty() || policy == "auto"
               ? " (chosen by nmt for AVX-512 over " + before + "; NMT_BLAS_CORE=keep keeps that)"
               : " (NMT_BLAS_CORE=" + policy + ", over " + before + ")";
  } else if (const char* env = std::getenv("OPENBLAS_CORETYPE")) {
    out += std::string(" (OPENBLAS_CORETYPE=") + env + ")";
  } else {
    out += " (OpenBLAS's own choice)";
  }
  return out;
}

namespace {

// The Fortran BLAS interface (LP64: 32-bit integers, as Debian's OpenBLAS and LibTorch use it).
using SgemmFn = void (*)(const char*, const char*, const int*, const int*, const int*, const float*,
                         const float*, const int*, const float*, const int*, const float*, float*,
                         const int*);

SgemmFn sgemm_function() {
  static const auto fn = process_function<SgemmFn>("sgemm_");
  return fn;
}

}  // namespace

bool have_sgemm() { return sgemm_function() != nullptr; }

void sgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                     int64_t ldc) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the operands swap.
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  const int LDA = static_cast<int>(lda), LDB = static_cast<int>(ldb), LDC = static_cast<int>(ldc);
  sgemm_function()(&tb, &ta, &N, &M, &K, &alpha, b, &LDB, a, &LDA, &beta, c, &LDC);
}

namespace {

// oneDNN's C API (dnnl.h; Debian's libdnnl-dev is not needed for two functions): row major,
// 'N'/'T', 64-bit sizes; returns dnnl_status_t, 0 on success.
using DnnlSgemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                            const float*, int64_t, float, float*, int64_t);
// dnnl_gemm_bf16bf16f32: the same with bfloat16 A and B (uint16_t bits) and float C.
using DnnlBf16GemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float, const uint16_t*,
                               int64_t, const uint16_t*, int64_t, float, float*, int64_t);
struct DnnlVersion {
  int major, minor, patch;
  const char* hash;
  unsigned cpu_runtime, gpu_runtime;
};
using DnnlVersionFn = const DnnlVersion* (*)();

enum class GemmPolicy { kAuto, kBlas, kOnednn };

// Largest inner size that "auto" gives oneDNN.
constexpr int64_t kOnednnMaxInner = 512;

GemmPolicy gemm_policy() {
  static const GemmPolicy policy = [] {
    const std::string v = env_or_empty("NMT_GEMM");
    if (v.empty() || v == "auto") return GemmPolicy::kAuto;
    if (v == "blas") return GemmPolicy::kBlas;
    if (v == "onednn") return GemmPolicy::kOnednn;
    throw Error("NMT_GEMM=" + v + ": expected auto, blas or onednn");
  }();
  return policy;
}

DnnlSgemmFn dnnl_sgemm_function() {
  static const auto fn = process_function<DnnlSgemmFn>("dnnl_sgemm");
  return fn;
}

DnnlBf16GemmFn dnnl_bf16_gemm_function() {
  static const auto fn = process_function<DnnlBf16GemmFn>("dnnl_gemm_bf16bf16f32");
  return fn;
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return cpu_has_avx512() && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

std::string gemm_shape(int64_t m, int64_t n, int64_t k) {
  return std::to_string(m) + " x " + std::to_string(k) + " x " + std::to_string(n);
}

// "oneDNN 2.6.3", or "oneDNN" when its version is not there to ask.
std::string onednn_name() {
  std::string name = "oneDNN";
  if (const auto version = process_function<DnnlVersionFn>("dnnl_version"))
    if (const DnnlVersion* v = version())
      name += " " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
              std::to_string(v->patch);
  return name;
}

}  // namespace

bool onednn_takes(int64_t m, int64_t n, int64_t k) {
  const GemmPolicy policy = gemm_policy();
  if (policy == GemmPolicy::kBlas || dnnl_sgemm_function() == nullptr) return false;
  return m > 0 && n > 0 && k > 0 && (policy == GemmPolicy::kOnednn || k <= kOnednnMaxInner);
}

std::string gemm_policy_description() {
  const GemmPolicy policy = gemm_policy();
  if (policy == GemmPolicy::kBlas) return "the BLAS for every product (NMT_GEMM=blas)";
  if (dnnl_sgemm_function() == nullptr)
    return "the BLAS for every product (no oneDNN dnnl_sgemm in this LibTorch's process)";
  const std::string name = onednn_name();
  if (policy == GemmPolicy::kOnednn)
    return name + " for the linear layers' forward and input-gradient products (NMT_GEMM=onednn)";
  return name + " for the linear layers' forward and input-gradient products with an inner size " +
         "up to " + std::to_string(kOnednnMaxInner) + ", the BLAS for the rest (NMT_GEMM=auto)";
}

std::string gemm_backend_description(bool bf16_products) {
  if (bf16_products)
    return blas_description() + "; precision bf16: " + onednn_name() +
           "'s bfloat16 GEMM for the linear layers' products, the BLAS for the rest";
  return blas_description() + "; " + gemm_policy_description();
}

void onednn_sgemm_row_major(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                            const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                            float* c, int64_t ldc) {
  const int status =
      dnnl_sgemm_function()('N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != 0)
    throw Error("oneDNN's dnnl_sgemm failed (status " + std::to_string(status) + ") on " +
                gemm_shape(m, n, k));
}

std::string bf16_gemm_missing() {
  // Asked at every step (the step's Bf16ProductsGuard): the CPU and the process do not change.
  static const std::string reason = [] {
    // Tests stand in for a CPU without them (the refusal, a group of unlike machines).
    if (test_hooks().no_bf16)
      return "NMT_DEBUG_NO_BF16 is set (as on a CPU without bfloat16 products)";
    if (!cpu_has_avx512_bf16()) return "this CPU lacks AVX512-BF16 (bfloat16 products)";
    if (dnnl_bf16_gemm_function() == nullptr)
      return "this LibTorch's process has no oneDNN dnnl_gemm_bf16bf16f32";
    return "";
  }();
  return reason;
}

bool have_bf16_gemm() { return bf16_gemm_missing().empty(); }

void onednn_bf16_gemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                float alpha, const uint16_t* a, int64_t lda, const uint16_t* b,
                                int64_t ldb, float beta, float* c, int64_t ldc) {
  const int status = dnnl_bf16_gemm_function()(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k,
                                               alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != 0)
    throw Error("oneDNN's dnnl_gemm_bf16bf16f32 failed (status " + std::to_string(status) +
                ") on " + gemm_shape(m, n, k));
}

}  // namespace nmt
