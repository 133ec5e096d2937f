#include "model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "util/util.h"

namespace nmt {

namespace {

uint64_t next_key() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

// Drop when a uniform 32-bit draw is below p * 2^32.
uint32_t drop_threshold(double p) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, "dropout probability must be in [0, 1), got ", p);
  return static_cast<uint32_t>(p * 4294967296.0);
}

// Writes the mask factors (0 or scale) of elements [0, n) to dst, in parallel; with src, then
// replaces each by combine(src[i], factor) in the same cache-warm chunk. Each 64-bit hash decides
// two neighbouring elements, one per 32-bit half. Branching on the mask bit or the sign in one
// loop instead mispredicts half the time: that made the fused ReLU + dropout 3x slower.
template <typename Combine>
void masked_map(const float* src, float* dst, int64_t n, double p, uint64_t key,
                const Combine& combine) {
  const uint32_t threshold = drop_threshold(p);
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  at::parallel_for(0, (n + 1) / 2, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const uint64_t h = splitmix64_mix(key + static_cast<uint64_t>(j) * kGoldenGamma);
      const int64_t i = 2 * j;
      dst[i] = static_cast<uint32_t>(h) < threshold ? 0.0f : scale;
      if (i + 1 < n) dst[i + 1] = static_cast<uint32_t>(h >> 32) < threshold ? 0.0f : scale;
    }
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

// Dropout that saves only its key: backward regenerates the mask.
struct HashedDropout : torch::autograd::Function<HashedDropout> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               double p, int64_t key) {
    ctx->saved_data["p"] = p;
    ctx->saved_data["key"] = key;
    return map_mask(x, p, key_from_ivalue(key), times);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const uint64_t key = key_from_ivalue(ctx->saved_data["key"]);
    return {map_mask(grad[0], ctx->saved_data["p"].toDouble(), key, times), torch::Tensor(),
            torch::Tensor()};
  }
};

// ReLU then dropout; the output alone says which gradients pass.
struct ReluDropout : torch::autograd::Function<ReluDropout> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& in,
                               double p, int64_t key) {
    auto out = map_mask(in, p, key_from_ivalue(key), [](float x, float factor) {
      const float v = x * factor;
      return v > 0.0f ? v : 0.0f;
    });
    const auto scale = static_cast<float>(1.0 / (1.0 - p));
    ctx->saved_data["scale"] = static_cast<double>(scale);
    ctx->save_for_backward({out});
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto out = ctx->get_saved_variables()[0];
    const auto g = grad[0].contiguous();
    auto gx = torch::empty_like(g, at::MemoryFormat::Contiguous);
    const float* y = out.data_ptr<float>();
    const float* gy = g.data_ptr<float>();
    float* dst = gx.data_ptr<float>();
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    at::parallel_for(0, g.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) dst[i] = gy[i] * (y[i] > 0.0f ? scale : 0.0f);
    });
    return {gx, torch::Tensor(), torch::Tensor()};
  }
};

bool fast_path(const torch::Tensor& x) {
  return x.device().is_cpu() && x.scalar_type() == torch::kFloat;
}

}  // namespace

torch::Tensor dropout_mask(at::IntArrayRef sizes, double p, uint64_t key) {
  auto mask = torch::empty(sizes, torch::kFloat);
  masked_map(nullptr, mask.data_ptr<float>(), mask.numel(), p, key, times);
  return mask;
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  if (!x.device().is_cpu())
    return torch::nn::functional::dropout(
        x, torch::nn::functional::DropoutFuncOptions().p(p).training(true));
  const uint64_t key = next_key();
  if (fast_path(x)) return HashedDropout::apply(x, p, key_to_ivalue(key));
  return x * dropout_mask(x.sizes(), p, key).to(x.scalar_type());
}

torch::Tensor relu_dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p == 0.0 || !fast_path(x)) return nmt::dropout(torch::relu(x), p, training);
  return ReluDropout::apply(x, p, key_to_ivalue(next_key()));
}

}  // namespace nmt
