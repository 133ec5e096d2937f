// Token-budget batches with length bucketing; deterministic given (seed, epoch). Plans are built
// from the pairs' lengths alone and hold 4 bytes a pair, so a corpus of 50M pairs plans in
// 200 MB; the batches read their ids from wherever the pairs live.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
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

// One epoch's batches. Items (pairs) are sorted by (pair width, source length, target length)
// with random tie-breaks, packed greedily so that rows x max width stays within batch_tokens,
// then the batches are shuffled. Every item appears exactly once. An item wider than the budget
// gets a batch of its own (config validation prevents this in training).
class BatchPlan {
 public:
  BatchPlan() = default;
  // lengths: source and target length of pair p at [2p] and [2p + 1]. items: the epoch's pairs
  // as pair indices (repeats allowed), or nullptr for pairs 0 .. n_items - 1.
  BatchPlan(const uint16_t* lengths, const uint32_t* items, int64_t n_items, int64_t batch_tokens,
            uint64_t seed);
  int64_t batches() const { return static_cast<int64_t>(order_.size()); }
  // The pair indices of the k-th batch in the epoch's order.
  std::vector<int64_t> batch(int64_t k) const;

 private:
  std::vector<uint32_t> rows_;    // pair indices, batch after batch, in sorted order
  std::vector<uint32_t> starts_;  // batch b is rows_[starts_[b] .. starts_[b + 1])
  std::vector<uint32_t> order_;   // the shuffled order of the batches
};

// The whole plan as lists of pair indices, for small corpora (validation, tests).
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& src_lens,
                                               const std::vector<int64_t>& tgt_lens,
                                               int64_t batch_tokens, uint64_t seed);

// The seed of one epoch's batch order.
uint64_t epoch_seed(uint64_t seed, int64_t epoch);

// A training corpus within the pairs: pairs [begin, end), and how much of it an epoch takes.
struct CorpusRange {
  int64_t begin = 0, end = 0;
  double weight = 1.0;
};

// The pairs of one epoch: each corpus weight x size times, floor(weight) full copies plus a
// sample without replacement of round(frac(weight) x size) pairs drawn from the epoch's seed,
// corpus after corpus. Empty when every weight is 1 (all pairs once, in order).
std::vector<uint32_t> epoch_items(const std::vector<CorpusRange>& corpora, uint64_t seed,
                                  int64_t epoch);

// Walks the epochs' batch plans; its position is part of a training checkpoint.
class BatchStream {
 public:
  // lengths as BatchPlan takes them, for `pairs` pairs; they must outlive the stream.
  // after_plan runs after each epoch's plan is made (a store lets go of the length pages).
  BatchStream(const uint16_t* lengths, int64_t pairs, std::vector<CorpusRange> corpora,
              int64_t batch_tokens, uint64_t seed, std::function<void()> after_plan = {});

  // Plans each epoch from the lengths `of_epoch(epoch)` returns instead of the fixed ones (subword
  // sampling: the epoch's drawn segmentations); they must stay valid until the next call.
  void plan_with(std::function<const uint16_t*(int64_t epoch)> of_epoch) {
    epoch_lengths_ = std::move(of_epoch);
  }
  // Goes to batch `batch_in_epoch` of `epoch`; throws Error when the epoch has fewer batches
  // (the data changed under a checkpoint).
  void seek(int64_t epoch, int64_t batch_in_epoch);
  // Moves to the next epoch when the current one is used up.
  void roll_over();
  // The next batch's pair indices.
  std::vector<int64_t> take() { return plan_.batch(next_++); }
  int64_t epoch() const { return epoch_; }
  int64_t position() const { return next_; }
  int64_t batches_per_epoch() const { return plan_.batches(); }

 private:
  const uint16_t* lengths_;
  int64_t pairs_;
  std::vector<CorpusRange> corpora_;
  int64_t batch_tokens_;
  uint64_t seed_;
  std::function<void()> after_plan_;
  std::function<const uint16_t*(int64_t)> epoch_lengths_;
  int64_t epoch_ = 0;
  int64_t next_ = 0;
  BatchPlan plan_;
};

}  // namespace nmt
