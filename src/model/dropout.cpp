#include "model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "model/compat.h"
#include "util/util.h"

namespace nmt {

namespace {

uint64_t draw_key() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

// Drop when a uniform 32-bit draw is below p * 2^32.
uint32_t drop_threshold(double p) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, "dropout probability must be in [0, 1), got ", p);
  return static_cast<uint32_t>(p * 4294967296.0);
}

// The mask factors (0 or scale) of the element pairs [begin, end) of n elements: the j-th hash
// decides elements 2j and 2j + 1, one per 32-bit half. The pair that would end past n is kept
// out of the main loop, which then has no branch and vectorizes. The hash's 64-bit multiplies
// vectorize only with AVX-512DQ (vpmullq; AVX2 emulates them), hence the clones: 1.7 ms per 4 M
// elements on one AVX-512 core against 13.5 ms scalar (docs/performance.md).
NMT_CPU_CLONES
void write_factors(float* dst, int64_t n, uint32_t threshold, float scale, uint64_t key,
                   int64_t begin, int64_t end) {
  const int64_t full = std::min(end, n / 2);
  for (int64_t j = begin; j < full; ++j) {
    const uint64_t h = splitmix64_mix(key + static_cast<uint64_t>(j) * kGoldenGamma);
    dst[2 * j] = static_cast<uint32_t>(h) < threshold ? 0.0f : scale;
    dst[2 * j + 1] = static_cast<uint32_t>(h >> 32) < threshold ? 0.0f : scale;
  }
  for (int64_t j = std::max(begin, full); j < end; ++j) {
    const uint64_t h = splitmix64_mix(key + static_cast<uint64_t>(j) * kGoldenGamma);
    dst[2 * j] = static_cast<uint32_t>(h) < threshold ? 0.0f : scale;
  }
}

// The factors of elements [first, first + count), one hash per element (element i is decided by
// half i % 2 of hash i / 2): any start, so rows of a larger mask can be made one at a time.
NMT_CPU_CLONES
void write_element_factors(float* dst, int64_t first, int64_t count, uint32_t threshold,
                           float scale, uint64_t key) {
  for (int64_t i = 0; i < count; ++i) {
    const auto e = static_cast<uint64_t>(first + i);
    const uint64_t h = splitmix64_mix(key + (e >> 1) * kGoldenGamma);
    const auto half = static_cast<uint32_t>(h >> (32 * (e & 1)));
    dst[i] = half < threshold ? 0.0f : scale;
  }
}

// Writes the mask factors of elements [0, n) to dst, in parallel; with src, then replaces each
// by combine(src[i], factor) in the same cache-warm chunk. Branching on the mask bit or the sign
// in one loop instead mispredicts half the time: that made the fused ReLU + dropout 3x slower.
template <typename Combine>
void masked_map(const float* src, float* dst, int64_t n, double p, uint64_t key,
                const Combine& combine) {
  const uint32_t threshold = drop_threshold(p);
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  at::parallel_for(0, (n + 1) / 2, 1 << 14, [&](int64_t begin, int64_t end) {
    write_factors(dst, n, threshold, scale, key, begin, end);
    if (src == nullptr) return;
    const int64_t hi = std::min(2 * end, n);
    for (int64_t i = 2 * begin; i < hi; ++i) dst[i] = combine(src[i], dst[i]);
  });
}

// A lambda, not a function: passed by reference, a function would be called through a pointer.
constexpr auto times = [](float x, float factor) { return x * factor; };

// out = combine(in, mask(key)) for float tensors, element by element in the logical order.
template <typename Combine>
torch::Tensor map_mask(const torch::Tensor& in, double p, uint64_t key, const Combine& combine) {
  const auto x = in.contiguous();
  auto out = torch::empty_like(x, at::MemoryFormat::Contiguous);
  masked_map(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), p, key, combine);
  return out;
}

// The keys are 64-bit; IValues hold int64, so they travel bit-cast.
int64_t key_to_ivalue(uint64_t key) {
  int64_t v;
  std::memcpy(&v, &key, sizeof v);
  return v;
}
uint64_t key_from_ivalue(const c10::IValue& v) {
  const int64_t i = v.toInt();
  uint64_t key;
  std::memcpy(&key, &i, sizeof key);
  return key;
}

float scale_of(double p) { return static_cast<float>(1.0 / (1.0 - p)); }

// x * mask(key) by the fused kernel of x's device (model/kernels.cu on CUDA).
torch::Tensor apply_mask(const torch::Tensor& x, double p, uint64_t key) {
  if (x.is_cuda())
    return compat::cuda_hashed_dropout(x, key, drop_threshold(p), scale_of(p), false);
  return map_mask(x, p, key, times);
}

// Dropout that saves only its key: backward regenerates the mask.
struct HashedDropout : torch::autograd::Function<HashedDropout> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               double p, int64_t key) {
    ctx->saved_data["p"] = p;
    ctx->saved_data["key"] = key;
    return apply_mask(x, p, key_from_ivalue(key));
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const uint64_t key = key_from_ivalue(ctx->saved_data["key"]);
    return {apply_mask(grad[0], ctx->saved_data["p"].toDouble(), key), torch::Tensor(),
            torch::Tensor()};
  }
};

// dst[i] = gy[i] * (y[i] > 0 ? scale : 0) for i in [begin, end). Written inside the parallel
// lambda, the loop branched on y's sign (wrong half the time) and reloaded the pointers after
// every store: 8.5 % of a bf16 training step. Here the choice is a select and the loop vectorizes.
NMT_CPU_CLONES
void relu_dropout_grad(const float* __restrict y, const float* __restrict gy, float* __restrict dst,
                       float scale, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) dst[i] = gy[i] * (y[i] > 0.0f ? scale : 0.0f);
}

// ReLU then dropout; the output alone says which gradients pass.
struct ReluDropout : torch::autograd::Function<ReluDropout> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& in,
                               double p, int64_t key) {
    const auto scale = scale_of(p);
    auto out = in.is_cuda() ? compat::cuda_hashed_dropout(in, key_from_ivalue(key),
                                                          drop_threshold(p), scale, true)
                            : map_mask(in, p, key_from_ivalue(key), [](float x, float factor) {
                                const float v = x * factor;
                                return v > 0.0f ? v : 0.0f;
                              });
    ctx->saved_data["scale"] = static_cast<double>(scale);
    ctx->save_for_backward({out});
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto out = ctx->get_saved_variables()[0];
    if (out.is_cuda())
      return {compat::cuda_relu_dropout_backward(
                  grad[0], out, static_cast<float>(ctx->saved_data["scale"].toDouble())),
              torch::Tensor(), torch::Tensor()};
    const auto g = grad[0].contiguous();
    auto gx = torch::empty_like(g, at::MemoryFormat::Contiguous);
    const float* y = out.data_ptr<float>();
    const float* gy = g.data_ptr<float>();
    float* dst = gx.data_ptr<float>();
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    at::parallel_for(0, g.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
      relu_dropout_grad(y, gy, dst, scale, begin, end);
    });
    return {gx, torch::Tensor(), torch::Tensor()};
  }
};

// The fused kernels take float CPU tensors, and CUDA tensors of the dtypes nmt's CUDA kernels
// have (when the build has them).
bool fast_path(const torch::Tensor& x) {
  if (x.is_cuda())
    return compat::cuda_kernels_built() && compat::cuda_kernel_dtype(x.scalar_type());
  return x.device().is_cpu() && x.scalar_type() == torch::kFloat;
}

// A 64-bit constant as the int64 ATen computes with: the same bits, arithmetic modulo 2^64.
int64_t as_int64(uint64_t v) {
  int64_t i;
  std::memcpy(&i, &v, sizeof i);
  return i;
}

// z ^= z >> s with a logical shift: ATen's >> on int64 is arithmetic, so the copies of the sign
// bit it shifts in are masked off.
void xor_shift_right(torch::Tensor& z, int s) {
  z.bitwise_xor_(z.bitwise_right_shift(s).bitwise_and_(as_int64((~uint64_t{0}) >> s)));
}

}  // namespace

torch::Tensor dropout_keep(int64_t n, double p, uint64_t key, const torch::Device& device) {
  const int64_t threshold = drop_threshold(p);
  // splitmix64_mix(key + j * kGoldenGamma) for pair j, as masked_map computes it.
  auto z = torch::arange((n + 1) / 2, torch::dtype(torch::kLong).device(device));
  z.mul_(as_int64(kGoldenGamma)).add_(as_int64(key));
  xor_shift_right(z, 30);
  z.mul_(as_int64(0xBF58476D1CE4E5B9ULL));
  xor_shift_right(z, 27);
  z.mul_(as_int64(0x94D049BB133111EBULL));
  xor_shift_right(z, 31);
  // Element 2j is decided by the low 32 bits, element 2j + 1 by the high ones.
  const int64_t low32 = 0xFFFFFFFFLL;
  auto low = z.bitwise_and(low32).ge(threshold);
  auto high = z.bitwise_right_shift(32).bitwise_and_(low32).ge_(threshold);
  return torch::stack({low, high}, 1).view(-1).narrow(0, 0, n);
}

uint64_t dropout_key() { return draw_key(); }

torch::Tensor dropout_keyed(const torch::Tensor& x, double p, uint64_t key) {
  return fast_path(x) ? dropout_fused(x, p, key) : dropout_aten(x, p, key);
}

void dropout_factors(float* dst, int64_t first, int64_t count, double p, uint64_t key) {
  write_element_factors(dst, first, count, drop_threshold(p), scale_of(p), key);
}

torch::Tensor dropout_mask(at::IntArrayRef sizes, double p, uint64_t key) {
  auto mask = torch::empty(sizes, torch::kFloat);
  masked_map(nullptr, mask.data_ptr<float>(), mask.numel(), p, key, times);
  return mask;
}

torch::Tensor dropout_fused(const torch::Tensor& x, double p, uint64_t key) {
  TORCH_CHECK(fast_path(x), "dropout_fused: no fused kernel for this tensor's device and dtype");
  return HashedDropout::apply(x, p, key_to_ivalue(key));
}

torch::Tensor relu_dropout_fused(const torch::Tensor& x, double p, uint64_t key) {
  TORCH_CHECK(fast_path(x),
              "relu_dropout_fused: no fused kernel for this tensor's device and dtype");
  return ReluDropout::apply(x, p, key_to_ivalue(key));
}

torch::Tensor dropout_aten(const torch::Tensor& x, double p, uint64_t key) {
  // (x * keep) * scale rounds once, as x * factor does in the fused kernel; autograd keeps the
  // one-byte keep mask for backward. Low-precision inputs are scaled in float32 and rounded
  // once, as LibTorch's own dropout does.
  const auto keep = dropout_keep(x.numel(), p, key, x.device()).view(x.sizes());
  const double scale = 1.0 / (1.0 - p);
  if (x.element_size() >= 4) return x.mul(keep).mul(scale);
  return x.to(torch::kFloat).mul(keep).mul(scale).to(x.scalar_type());
}

torch::Tensor relu_dropout_aten(const torch::Tensor& x, double p, uint64_t key) {
  return dropout_aten(torch::relu(x), p, key);
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  return dropout_keyed(x, p, draw_key());
}

torch::Tensor relu_dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return torch::relu(x);
  const uint64_t key = draw_key();
  return fast_path(x) ? relu_dropout_fused(x, p, key) : relu_dropout_aten(x, p, key);
}

}  // namespace nmt
