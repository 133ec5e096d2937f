#include "util/blas.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <cstdlib>

namespace nmt {
namespace {

// Set for the re-executed program: what OPENBLAS_CORETYPE was before ("" = unset), so the log
// can say who chose the core, and so the program is executed again at most once.
constexpr const char* kMarker = "NMT_BLAS_CORE_REPLACED";

using StringFn = char* (*)();

StringFn openblas_function(const char* name) {
  return reinterpret_cast<StringFn>(::dlsym(RTLD_DEFAULT, name));
}

bool has_avx512() {
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

}  // namespace

void select_blas_kernels(char** argv) {
  if (std::getenv(kMarker) != nullptr) return;
  const StringFn corename = openblas_function("openblas_get_corename");
  if (corename == nullptr) return;  // not OpenBLAS
  const char* core = corename();
  if (core == nullptr) return;
  const std::string policy = env_or_empty("NMT_BLAS_CORE");
  std::string target;
  if (policy.empty() || policy == "auto") {
    if (!has_avx512() || is_avx512_core(core)) return;
    target = avx512_core();
  } else if (policy == "keep" || strcasecmp(policy.c_str(), core) == 0) {
    return;
  } else {
    target = policy;
  }
  const std::string before = env_or_empty("OPENBLAS_CORETYPE");
  if (::setenv(kMarker, before.c_str(), 1) != 0 ||
      ::setenv("OPENBLAS_CORETYPE", target.c_str(), 1) != 0)
    return;
  ::execv("/proc/self/exe", argv);
  // Could not execute again (no /proc): carry on with the kernels already loaded.
  if (before.empty())
    ::unsetenv("OPENBLAS_CORETYPE");
  else
    ::setenv("OPENBLAS_CORETYPE", before.c_str(), 1);
  ::unsetenv(kMarker);
}

std::string blas_description() {
  const StringFn corename = openblas_function("openblas_get_corename");
  if (corename == nullptr) return "a BLAS without OpenBLAS's query functions";
  std::string out = "OpenBLAS";
  if (const StringFn config = openblas_function("openblas_get_config")) {
    // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64": take the version.
    const std::string c = config();
    const size_t from = c.find(' ');
    if (from != std::string::npos)
      out += " " + c.substr(from + 1, c.find(' ', from + 1) - from - 1);
  }
  const char* core = corename();
  out += std::string(", ") + (core != nullptr ? core : "unknown") + " kernels";
  const char* replaced = std::getenv(kMarker);
  const std::string policy = env_or_empty("NMT_BLAS_CORE");
  if (replaced != nullptr) {
    const std::string before =
        *replaced ? "OPENBLAS_CORETYPE=" + std::string(replaced) : "OpenBLAS's own choice";
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

}  // namespace nmt
