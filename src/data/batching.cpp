#include "data/batching.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "util/util.h"

namespace nmt {

uint64_t SplitMix64::next() { return splitmix64_mix(state_ += kGoldenGamma); }

uint64_t SplitMix64::below(uint64_t n) {
  // Rejection sampling keeps it unbiased.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = next();
  while (r >= limit);
  return r % n;
}

uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
  SplitMix64 mix(seed * 0x100000001B3ULL + static_cast<uint64_t>(epoch));
  return mix.next();
}

namespace {

// Sort key of the item at position j within one width: its lengths, then its tie-break, the
// j-th value of the SplitMix64 stream from the seed. The streams' values are distinct, so the
// order is total and the same whichever algorithm sorts.
struct ItemKey {
  uint32_t lengths;  // source << 16 | target
  uint32_t item;
  uint64_t tie;
  bool operator<(const ItemKey& o) const {
    return lengths != o.lengths ? lengths < o.lengths : tie < o.tie;
  }
};

}  // namespace

BatchPlan::BatchPlan(const uint16_t* lengths, const uint32_t* items, int64_t n_items,
                     int64_t batch_tokens, uint64_t seed) {
  if (n_items < 0 || static_cast<uint64_t>(n_items) >= std::numeric_limits<uint32_t>::max())
    throw Error("a batch plan takes fewer than 2^32 pairs, got " + std::to_string(n_items));
  const auto n = static_cast<uint32_t>(n_items);
  auto pair_of = [&](uint32_t j) { return items != nullptr ? items[j] : j; };
  auto width_of = [&](uint32_t p) {
    return static_cast<uint32_t>(pair_width(lengths[2 * size_t{p}], lengths[2 * size_t{p} + 1]));
  };
  // Counting sort by width (at most 65536), then each width's items by their keys.
  std::vector<uint32_t> first(65538, 0);
  for (uint32_t j = 0; j < n; ++j) ++first[width_of(pair_of(j)) + 1];
  std::partial_sum(first.begin(), first.end(), first.begin());
  rows_.resize(n);
  {
    std::vector<uint32_t> next(first.begin(), first.end() - 1);
    for (uint32_t j = 0; j < n; ++j) rows_[next[width_of(pair_of(j))]++] = j;
  }
  std::vector<ItemKey> keys;
  for (size_t w = 0; w + 1 < first.size(); ++w) {
    const uint32_t begin = first[w], end = first[w + 1];
    if (end - begin < 1) continue;
    keys.resize(end - begin);
    for (uint32_t k = begin; k < end; ++k) {
      const uint32_t j = rows_[k];
      const uint32_t p = pair_of(j);
      keys[k - begin] = {static_cast<uint32_t>(lengths[2 * size_t{p}]) << 16 |
                             lengths[2 * size_t{p} + 1],
                         j, splitmix64_mix(seed + (uint64_t{j} + 1) * kGoldenGamma)};
    }
    std::sort(keys.begin(), keys.end());
    for (uint32_t k = begin; k < end; ++k) rows_[k] = pair_of(keys[k - begin].item);
  }
  // Greedy packing in sorted order.
  int64_t width = 0, count = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const int64_t w = width_of(rows_[k]);
    if (count > 0 && std::max(width, w) * (count + 1) > batch_tokens) {
      starts_.push_back(k - static_cast<uint32_t>(count));
      width = 0;
      count = 0;
    }
    ++count;
    width = std::max(width, w);
  }
  if (count > 0) starts_.push_back(n - static_cast<uint32_t>(count));
  starts_.push_back(n);
  // The shuffle continues the tie-breaks' stream.
  order_.resize(starts_.size() - 1);
  std::iota(order_.begin(), order_.end(), 0);
  SplitMix64 rng(seed + uint64_t{n} * kGoldenGamma);
  for (size_t k = order_.size(); k > 1; --k) std::swap(order_[k - 1], order_[rng.below(k)]);
}

std::vector<int64_t> BatchPlan::batch(int64_t k) const {
  const uint32_t b = order_[static_cast<size_t>(k)];
  return std::vector<int64_t>(rows_.begin() + starts_[b], rows_.begin() + starts_[b + 1]);
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& src_lens,
                                               const std::vector<int64_t>& tgt_lens,
                                               int64_t batch_tokens, uint64_t seed) {
  std::vector<uint16_t> lengths(2 * src_lens.size());
  for (size_t i = 0; i < src_lens.size(); ++i) {
    if (src_lens[i] > 65535 || tgt_lens[i] > 65535)
      throw Error("make_batches: a sequence of more than 65535 pieces");
    lengths[2 * i] = static_cast<uint16_t>(src_lens[i]);
    lengths[2 * i + 1] = static_cast<uint16_t>(tgt_lens[i]);
  }
  const BatchPlan plan(lengths.data(), nullptr, static_cast<int64_t>(src_lens.size()),
                       batch_tokens, seed);
  std::vector<std::vector<int64_t>> out;
  out.reserve(static_cast<size_t>(plan.batches()));
  for (int64_t k = 0; k < plan.batches(); ++k) out.push_back(plan.batch(k));
  return out;
}

std::vector<uint32_t> epoch_items(const std::vector<CorpusRange>& corpora, uint64_t seed,
                                  int64_t epoch) {
  if (std::all_of(corpora.begin(), corpora.end(), [](const auto& c) { return c.weight == 1.0; }))
    return {};
  SplitMix64 rng(epoch_seed(seed, epoch) ^ 0x5EED5A3B1E5ULL);
  std::vector<uint32_t> items;
  for (const auto& c : corpora) {
    const int64_t n = c.end - c.begin;
    const double copies = std::floor(c.weight);
    const auto extra = static_cast<int64_t>(std::llround((c.weight - copies) * double(n)));
    const double total = double(items.size()) + copies * double(n) + double(extra);
    if (total >= double(std::numeric_limits<uint32_t>::max()))
      throw Error("data.train: the weights ask for " + std::to_string(int64_t(total)) +
                  " pairs an epoch; at most 2^32 - 1");
    for (int64_t copy = 0; copy < static_cast<int64_t>(copies); ++copy)
      for (int64_t p = c.begin; p < c.end; ++p) items.push_back(static_cast<uint32_t>(p));
    // Selection sampling (Knuth's algorithm S): each subset of `extra` pairs equally likely,
    // in corpus order, in one pass and no memory.
    int64_t needed = extra;
    for (int64_t i = 0; i < n && needed > 0; ++i)
      if (rng.below(static_cast<uint64_t>(n - i)) < static_cast<uint64_t>(needed)) {
        items.push_back(static_cast<uint32_t>(c.begin + i));
        --needed;
      }
  }
  return items;
}

BatchStream::BatchStream(const uint16_t* lengths, int64_t pairs, std::vector<CorpusRange> corpora,
                         int64_t batch_tokens, uint64_t seed, std::function<void()> after_plan)
    : lengths_(lengths),
      pairs_(pairs),
      corpora_(std::move(corpora)),
      batch_tokens_(batch_tokens),
      seed_(seed),
      after_plan_(std::move(after_plan)) {}

void BatchStream::seek(int64_t epoch, int64_t batch_in_epoch) {
  epoch_ = epoch;
  const auto items = epoch_items(corpora_, seed_, epoch_);
  const uint16_t* lengths = epoch_lengths_ ? epoch_lengths_(epoch_) : lengths_;
  plan_ = BatchPlan(lengths, items.empty() ? nullptr : items.data(),
                    items.empty() ? pairs_ : static_cast<int64_t>(items.size()), batch_tokens_,
                    epoch_seed(seed_, epoch_));
  if (after_plan_) after_plan_();
  if (batch_in_epoch < 0 || batch_in_epoch > plan_.batches())
    throw Error("checkpoint data position " + std::to_string(batch_in_epoch) +
                " is outside epoch " + std::to_string(epoch) + " (" +
                std::to_string(plan_.batches()) +
                " batches): was the training data changed?");
  next_ = batch_in_epoch;
}

void BatchStream::roll_over() {
  if (next_ >= plan_.batches()) seek(epoch_ + 1, 0);
}

}  // namespace nmt
