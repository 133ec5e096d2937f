#include "decode/sampling.h"

#include <cmath>
#include <limits>

#include "text/spm.h"
#include "util/util.h"

namespace nmt {

void check_sampling_options(const SamplingOptions& o) {
  if (!(o.temperature > 0.0) || !std::isfinite(o.temperature))
    throw Error("--temperature must be > 0, got " + std::to_string(o.temperature));
  if (o.top_k < 0) throw Error("--top-k must be >= 0 (0 = off), got " + std::to_string(o.top_k));
  if (!(o.top_p > 0.0 && o.top_p <= 1.0))
    throw Error("--top-p must be in (0, 1] (1 = off), got " + std::to_string(o.top_p));
}

namespace {

uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Per row, the tokens outside the fewest most likely ones whose probabilities reach p (the most
// likely token always stays), as a mask. Ties keep vocabulary order (a stable sort).
torch::Tensor outside_nucleus(const torch::Tensor& logp, double p) {
  const auto [sorted, order] = logp.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true);
  const auto probs = sorted.exp().to(torch::kDouble);
  // The mass before each token: a token is kept while the tokens above it hold less than p.
  const auto before = probs.cumsum(1) - probs;
  const auto drop_sorted = before.ge(p);
  return torch::zeros_like(drop_sorted).scatter(1, order, drop_sorted);
}

}  // namespace

uint64_t stream_key(uint64_t seed, uint64_t line, uint64_t sample, uint64_t step) {
  uint64_t h = mix64(seed);
  h = mix64(h ^ line);
  h = mix64(h ^ sample);
  return mix64(h ^ step);
}

torch::Tensor gumbel_noise(const std::vector<uint64_t>& keys, int64_t V) {
  auto noise = torch::empty({static_cast<int64_t>(keys.size()), V}, torch::kFloat);
  float* out = noise.data_ptr<float>();
  for (size_t r = 0; r < keys.size(); ++r) {
    float* row = out + static_cast<int64_t>(r) * V;
    for (int64_t v = 0; v < V; ++v) {
      // splitmix64's v-th output of the stream that starts at the key.
      const uint64_t bits = mix64(keys[r] + static_cast<uint64_t>(v) * 0x9e3779b97f4a7c15ULL);
      // In (0, 1) exactly: 52 bits and a half keep it off both ends (off 1 too, in double).
      const double u = (static_cast<double>(bits >> 12) + 0.5) * 0x1.0p-52;
      row[v] = static_cast<float>(-std::log(-std::log(u)));
    }
  }
  return noise;
}

std::pair<torch::Tensor, torch::Tensor> sample_tokens(const torch::Tensor& scores,
                                                      const torch::Tensor& noise,
                                                      const SamplingOptions& options) {
  const int64_t V = scores.size(1);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const auto model_logp = torch::log_softmax(scores.to(torch::kFloat), 1);
  // Never outputs: a sample that drew them would end in garbage.
  auto logp = model_logp.index_fill(
      1, torch::tensor({int64_t{kPadId}, int64_t{kBosId}}).to(model_logp.device()), kNegInf);
  if (options.top_k > 0 && options.top_k < V) {
    const auto kth = std::get<0>(logp.topk(options.top_k, 1)).narrow(1, options.top_k - 1, 1);
    logp = logp.masked_fill(logp.lt(kth), kNegInf);
  }
  if (options.top_p < 1.0) {
    // The nucleus of the distribution the temperature makes.
    const auto tempered = torch::log_softmax(logp / options.temperature, 1);
    logp = logp.masked_fill(outside_nucleus(tempered, options.top_p), kNegInf);
  }
  const auto keys = logp / options.temperature + noise.to(logp.device());
  const auto tokens = keys.argmax(1);
  const auto token_logp = model_logp.gather(1, tokens.view({-1, 1})).view({-1});
  return {tokens, token_logp};
}

}  // namespace nmt
