// GEMM backends on the model's real shapes: OpenBLAS (the kernels LibTorch 1.13 uses for float32
// linear/matmul) against oneDNN's dnnl_sgemm, for a Linear's three products (forward X·Wᵀ,
// backward-data dY·W, backward-weight dYᵀ·X), at the thread counts given; where the CPU has
// AVX512-BF16, also oneDNN's bfloat16 GEMM (dnnl_gemm_bf16bf16f32: bfloat16 inputs, float
// accumulation and output, what precision bf16 runs on the CPU). Both libraries are loaded with
// dlopen, so this needs neither LibTorch nor oneDNN headers and builds in a second:
//
//   g++ -O2 -fopenmp tests/bench/gemm_backends.cpp -ldl -o /tmp/gemm_backends
//   OPENBLAS_CORETYPE=Cooperlake /tmp/gemm_backends [ROWS] [ROUNDS] [THREADS...]
//   /tmp/gemm_backends --peak [THREADS] [ROUNDS]     (the machine's sgemm peak, for bench_train.sh)
//
// Rounds alternate the backends so that the VM's drifting speed hits both alike; the table shows
// the median GFLOP/s of each (shape, product, threads, backend) over the rounds.
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// cblas_sgemm with CBLAS's enum values (row major 101, no-trans 111, trans 112).
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
using OpenblasSetThreads = void (*)(int);
using OpenblasCorename = char* (*)();
// dnnl_sgemm: row major, 'N'/'T', int64 dims; returns dnnl_status_t (0 = success).
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
// dnnl_gemm_bf16bf16f32: the same with bfloat16 A and B (their bits) and float C.
using DnnlBf16Gemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,
                             const uint16_t*, int64_t, float, float*, int64_t);

// float to bfloat16, rounding to nearest even (as ATen does; inputs here are finite).
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void* must_open(const char* name) {
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error(std::string("dlopen ") + name + ": " + dlerror());
  return h;
}

template <class F>
F must_sym(void* h, const char* name) {
  void* s = dlsym(h, name);
  if (!s) throw std::runtime_error(std::string("dlsym ") + name);
  return reinterpret_cast<F>(s);
}

struct Product {
  const char* name;  // which of a Linear's products
  bool trans_a, trans_b;
  int64_t m, n, k;  // C[m×n] = op(A)[m×k] · op(B)[k×n]
};

struct Shape {
  const char* name;
  int64_t in, out;  // the Linear's weight is [out × in]
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Backends {
  CblasSgemm cblas_sgemm;
  OpenblasSetThreads openblas_threads;
  OpenblasCorename openblas_core;
  DnnlSgemm dnnl_sgemm;
  DnnlBf16Gemm dnnl_bf16 = nullptr;  // null without AVX512-BF16 (oneDNN would emulate it)

  Backends() {
    void* ob = must_open("libopenblas.so.0");
    cblas_sgemm = must_sym<CblasSgemm>(ob, "cblas_sgemm");
    openblas_threads = must_sym<OpenblasSetThreads>(ob, "openblas_set_num_threads");
    openblas_core = must_sym<OpenblasCorename>(ob, "openblas_get_corename");
    void* dn = must_open("libdnnl.so.2");
    dnnl_sgemm = must_sym<DnnlSgemm>(dn, "dnnl_sgemm");
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bf16"))
      dnnl_bf16 = reinterpret_cast<DnnlBf16Gemm>(dlsym(dn, "dnnl_gemm_bf16bf16f32"));
  }
};

struct Rates {
  double openblas, onednn, bf16;  // median GFLOP/s over the rounds; bf16 0 when not measured
};

// Checks that both backends compute the same product, then times them in alternating rounds.
Rates measure(const Backends& be, const Product& p, int threads, int rounds, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> a(p.m * p.k), b(p.k * p.n), c(p.m * p.n);
  for (float& x : a) x = dist(gen);
  for (float& x : b) x = dist(gen);
  const int64_t lda = p.trans_a ? p.m : p.k, ldb = p.trans_b ? p.k : p.n;
  const double flop = 2.0 * p.m * p.n * p.k;
  be.openblas_threads(threads);
  omp_set_num_threads(threads);  // oneDNN runs on the same libgomp pool
  auto run_openblas = [&] {
    be.cblas_sgemm(101, p.trans_a ? 112 : 111, p.trans_b ? 112 : 111, p.m, p.n, p.k, 1.f, a.data(),
                   lda, b.data(), ldb, 0.f, c.data(), p.n);
  };
  auto run_dnnl = [&] {
    if (be.dnnl_sgemm(p.trans_a ? 'T' : 'N', p.trans_b ? 'T' : 'N', p.m, p.n, p.k, 1.f, a.data(),
                      lda, b.data(), ldb, 0.f, c.data(), p.n) != 0)
      throw std::runtime_error("dnnl_sgemm failed");
  };
  // Same product from both, or the timing means nothing.
  run_openblas();
  const std::vector<float> ref = c;
  run_dnnl();
  double err = 0, scale = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    err = std::max(err, static_cast<double>(std::abs(c[i] - ref[i])));
    scale = std::max(scale, static_cast<double>(std::abs(ref[i])));
  }
  if (err > 1e-4 * scale) throw std::runtime_error(std::string("backends disagree on ") + p.name);
  // bfloat16 copies of the operands; their product must be the float product of the rounded
  // values.
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  std::vector<float> ar(a.size()), br(b.size());
  for (size_t i = 0; i < a.size(); ++i) ar[i] = from_bf16(a16[i] = to_bf16(a[i]));
  for (size_t i = 0; i < b.size(); ++i) br[i] = from_bf16(b16[i] = to_bf16(b[i]));
  auto run_bf16 = [&] {
    if (be.dnnl_bf16(p.trans_a ? 'T' : 'N', p.trans_b ? 'T' : 'N', p.m, p.n, p.k, 1.f, a16.data(),
                     lda, b16.data(), ldb, 0.f, c.data(), p.n) != 0)
      throw std::runtime_error("dnnl_gemm_bf16bf16f32 failed");
  };
  if (be.dnnl_bf16) {
    be.cblas_sgemm(101, p.trans_a ? 112 : 111, p.trans_b ? 112 : 111, p.m, p.n, p.k, 1.f, ar.data(),
                   lda, br.data(), ldb, 0.f, c.data(), p.n);
    const std::vector<float> rounded_ref = c;
    run_bf16();
    double e16 = 0;
    for (size_t i = 0; i < c.size(); ++i)
      e16 = std::max(e16, static_cast<double>(std::abs(c[i] - rounded_ref[i])));
    if (e16 > 1e-4 * scale)
      throw std::runtime_error(std::string("bfloat16 GEMM disagrees on ") + p.name);
  }
  // Repeat each timed batch until it lasts 0.2 s, so that short products are not dominated by
  // the clock.
  auto time = [&](auto&& fn) {
    fn();  // warm-up: JIT, page faults
    for (int reps = 1;; reps *= 2) {
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) fn();
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (sec > 0.2) return flop * reps / sec / 1e9;
    }
  };
  std::vector<double> ob, dn, bf;
  for (int r = 0; r < rounds; ++r) {
    ob.push_back(time(run_openblas));
    dn.push_back(time(run_dnnl));
    if (be.dnnl_bf16) bf.push_back(time(run_bf16));
  }
  return {median(ob), median(dn), bf.empty() ? 0.0 : median(bf)};
}

// The machine's sgemm peak: the best median rate of either backend on large square products;
// then, where measured, the bfloat16 GEMM's on the same products.
void peak(const Backends& be, int threads, int rounds) {
  std::mt19937 gen(1);
  double best = 0, best_bf16 = 0;
  std::string what;
  for (int64_t n : {2048, 4096}) {
    const Rates r = measure(be, {"square", false, false, n, n, n}, threads, rounds, gen);
    for (auto [rate, name] : {std::pair{r.openblas, "OpenBLAS"}, std::pair{r.onednn, "oneDNN"}}) {
      std::printf("sgemm %lld^3, %d threads: %s %.1f GFLOP/s\n", static_cast<long long>(n), threads,
                  name, rate);
      if (rate > best) best = rate, what = std::string(name) + " " + std::to_string(n) + "^3";
    }
    if (be.dnnl_bf16)
      std::printf("bfloat16 GEMM %lld^3, %d threads: oneDNN %.1f GFLOP/s\n",
                  static_cast<long long>(n), threads, r.bf16);
    best_bf16 = std::max(best_bf16, r.bf16);
  }
  std::printf("peak_gflops %.1f (%s, OpenBLAS core %s)\n", best, what.c_str(), be.openblas_core());
  if (be.dnnl_bf16) std::printf("bf16_peak_gflops %.1f (oneDNN)\n", best_bf16);
}

}  // namespace

int main(int argc, char** argv) try {
  const Backends be;
  if (argc > 1 && std::string(argv[1]) == "--peak") {
    peak(be, argc > 2 ? std::atoi(argv[2]) : 2, argc > 3 ? std::atoi(argv[3]) : 3);
    return 0;
  }
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 3920;  // tokens in a 4096-token batch
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<int> threads;
  for (int i = 3; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, 2};
  if (rows <= 0 || rounds <= 0) throw std::runtime_error("ROWS and ROUNDS must be positive");
  std::printf("OpenBLAS core: %s; rows %lld; %d rounds; median GFLOP/s\n", be.openblas_core(),
              static_cast<long long>(rows), rounds);

  // configs/multi30k_en_de.json: d_model 256, d_ff 1024, 8,000-piece vocabulary.
  const std::vector<Shape> shapes = {{"attention Q/out", 256, 256}, {"cross K+V", 256, 512},
                                     {"self QKV", 256, 768},        {"FFN in", 256, 1024},
                                     {"FFN out", 1024, 256},        {"vocabulary", 256, 8000}};
  std::mt19937 gen(1);
  std::printf(
      "| shape (in → out) | product | m × k × n | threads | OpenBLAS | oneDNN | oneDNN / OpenBLAS "
      "|%s\n",
      be.dnnl_bf16 ? " oneDNN bf16 | bf16 / OpenBLAS |" : "");
  std::printf("|---|---|---|---|---|---|---|%s\n", be.dnnl_bf16 ? "---|---|" : "");
  for (const Shape& s : shapes) {
    // forward Y = X·Wᵀ; backward-data dX = dY·W; backward-weight dW = dYᵀ·X.
    const Product products[] = {{"forward", false, true, rows, s.out, s.in},
                                {"backward data", false, false, rows, s.in, s.out},
                                {"backward weight", true, false, s.out, s.in, rows}};
    for (const Product& p : products) {
      for (int t : threads) {
        const Rates r = measure(be, p, t, rounds, gen);
        std::printf("| %s (%lld → %lld) | %s | %lld × %lld × %lld | %d | %.1f | %.1f | %.2f× |",
                    s.name, static_cast<long long>(s.in), static_cast<long long>(s.out), p.name,
                    static_cast<long long>(p.m), static_cast<long long>(p.k),
                    static_cast<long long>(p.n), t, r.openblas, r.onednn, r.onednn / r.openblas);
        if (be.dnnl_bf16) std::printf(" %.1f | %.2f× |", r.bf16, r.bf16 / r.openblas);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gemm_backends: %s\n", e.what());
  return 1;
}
