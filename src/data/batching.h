// Token-budget batches with length bucketing; deterministic given (seed, epoch).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace nmt {

// Width a pair occupies in a padded batch: source + EOS vs. BOS/EOS-extended target.
inline int64_t pair_width(int64_t src_len, int64_t tgt_len) {
  return std::max(src_len, tgt_len) + 1;
}

// Small, serialisable PRNG (SplitMix64): the same stream on every platform.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform in [0, n).
  uint64_t below(uint64_t n);
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

// Groups pair indices into batches whose rows x max width stays within batch_tokens. Pairs are
// sorted by (pair width, source length, target length) with random tie-breaks, packed greedily,
// then the batches are shuffled. Every pair appears exactly once. A pair wider than the budget gets
// a batch of its own (config validation prevents this in training).
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& src_lens,
                                               const std::vector<int64_t>& tgt_lens,
                                               int64_t batch_tokens, uint64_t seed);

// The seed of one epoch's batch order.
uint64_t epoch_seed(uint64_t seed, int64_t epoch);

// Walks the epochs' batch plans (make_batches with epoch_seed); its position is part of a
// training checkpoint.
class BatchStream {
 public:
  BatchStream(std::vector<int64_t> src_lens, std::vector<int64_t> tgt_lens, int64_t batch_tokens,
              uint64_t seed);

  // Goes to batch `batch_in_epoch` of `epoch`; throws Error when the epoch has fewer batches
  // (the data changed under a checkpoint).
  void seek(int64_t epoch, int64_t batch_in_epoch);
  // Moves to the next epoch when the current one is used up.
  void roll_over();
  // The next batch's pair indices.
  const std::vector<int64_t>& take() { return plan_[next_++]; }
  int64_t epoch() const { return epoch_; }
  int64_t position() const { return next_; }
  int64_t batches_per_epoch() const { return static_cast<int64_t>(plan_.size()); }

 private:
  std::vector<int64_t> src_lens_, tgt_lens_;
  int64_t batch_tokens_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  int64_t next_ = 0;
  std::vector<std::vector<int64_t>> plan_;
};

}  // namespace nmt
