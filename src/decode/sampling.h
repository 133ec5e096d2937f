// Sampling: one token a step drawn from the model's distribution, reshaped by a temperature,
// top-k and top-p (nucleus) filters. Sampled back-translation beats beam at scale (Edunov et
// al. 2018). Every draw comes from a random stream keyed by (seed, line, sample, step), not from
// a generator that batches share, so a line's samples do not depend on the batch, the chunk or
// the thread it was decoded in, nor on which lines a resumed job skipped.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace nmt {

struct SamplingOptions {
  bool enabled = false;      // false: search is greedy or beam
  double temperature = 1.0;  // divides the log-probabilities before drawing (> 0; < 1 sharpens)
  int64_t top_k = 0;         // draw among the k most likely tokens (0 = all)
  double top_p = 1.0;        // draw among the fewest most likely tokens whose mass reaches p (1 = all)
  uint64_t seed = 1;         // keys every line's random stream with the line's number
};

// Throws Error naming the flag when a value is out of range.
void check_sampling_options(const SamplingOptions& options);

// The key of one draw's random stream: sample `sample` of input line `line` at output position
// `step` (splitmix64 finalisers chained), so only these decide it.
uint64_t stream_key(uint64_t seed, uint64_t line, uint64_t sample, uint64_t step);

// Standard Gumbel noise [keys, V] (float, CPU): element (r, v) is -log(-log(U)) for the v-th
// uniform of key r's splitmix64 stream, U in (0, 1) with 52 bits.
torch::Tensor gumbel_noise(const std::vector<uint64_t>& keys, int64_t V);

// Draws one token per row of scores [N, V] (log-probabilities up to a constant per row, any
// device) by the Gumbel-max trick: the argmax of the filtered log-probabilities / temperature
// plus noise [N, V] (gumbel_noise; moved to the scores' device) is a draw from the filtered
// distribution. Unlike an inverse CDF over the vocabulary, whose thousands of tiny intervals
// let rounding noise of 1e-7 move a draw, a draw only changes when its two best noisy values
// are that close, so the samples do not depend on the batch a line was decoded in. PAD and BOS
// are never drawn. Returns the tokens [N] (int64, on the scores' device) and their
// log-probabilities under the model itself [N] (float: no temperature, no filter), so a
// sample's score is what forced decoding (nmt score) gives it.
std::pair<torch::Tensor, torch::Tensor> sample_tokens(const torch::Tensor& scores,
                                                      const torch::Tensor& noise,
                                                      const SamplingOptions& options);

}  // namespace nmt
