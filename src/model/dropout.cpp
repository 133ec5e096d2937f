#include "model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <mutex>

#include "util/util.h"

namespace nmt {

namespace {

uint64_t next_key() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

}  // namespace

torch::Tensor dropout_mask(at::IntArrayRef sizes, double p, uint64_t key) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, "dropout probability must be in [0, 1), got ", p);
  auto mask = torch::empty(sizes, torch::kFloat);
  float* m = mask.data_ptr<float>();
  const int64_t n = mask.numel();
  // Drop when a uniform 32-bit draw is below p * 2^32.
  const auto threshold = static_cast<uint32_t>(p * 4294967296.0);
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  // Each 64-bit hash decides two neighbouring elements, one per 32-bit half.
  at::parallel_for(0, (n + 1) / 2, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const uint64_t h = splitmix64_mix(key + static_cast<uint64_t>(j) * kGoldenGamma);
      const int64_t i = 2 * j;
      m[i] = static_cast<uint32_t>(h) < threshold ? 0.0f : scale;
      if (i + 1 < n) m[i + 1] = static_cast<uint32_t>(h >> 32) < threshold ? 0.0f : scale;
    }
  });
  return mask;
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  if (!x.device().is_cpu())
    return torch::nn::functional::dropout(
        x, torch::nn::functional::DropoutFuncOptions().p(p).training(true));
  auto mask = dropout_mask(x.sizes(), p, next_key());
  if (mask.scalar_type() != x.scalar_type()) mask = mask.to(x.scalar_type());
  return x * mask;
}

}  // namespace nmt
