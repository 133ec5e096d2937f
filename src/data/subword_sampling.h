// Subword regularization (data.src_sampling, data.tgt_sampling): the training pairs with each
// side segmented anew each time it is read, from the text the token store keeps beside the ids.
//
// A draw is a function of (train.seed, epoch, pair, side) alone, so a resumed run draws what
// the uninterrupted one drew, and data-parallel processes draw what one process would. Nothing
// is held per epoch but the draws' lengths (4 bytes a pair, as the plan itself): each epoch's
// plan is made from them, and a batch's sentences are drawn again when the batch is built. A
// draw longer than data.max_len is replaced by the best segmentation.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.h"
#include "data/pairs.h"
#include "data/store.h"
#include "text/vocabs.h"

namespace nmt {

// The key of one draw.
uint64_t sampling_seed(uint64_t seed, int64_t epoch, int64_t pair, bool src);

class SampledPairs : public Pairs {
 public:
  // Throws Error naming the key when the store keeps no text or a side's vocabulary has no
  // segmentations to draw from (char, word). The store must outlive it.
  SampledPairs(const TokenStore& store, const Vocabs& vocabs, const DataConfig& data,
               uint64_t seed);
  // Whether either side samples (else the store's ids are the pairs).
  static bool wanted(const DataConfig& data) {
    return data.src_sampling.enabled || data.tgt_sampling.enabled;
  }
  // The epoch whose draws append_src/append_tgt return.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  // The lengths of `epoch`'s draws as BatchPlan takes them (source and target of pair p at [2p]
  // and [2p + 1]), drawn on `threads` threads: batches planned from them are as full and as
  // little padded as batches of best segmentations. Valid until the next call.
  const uint16_t* epoch_lengths(int64_t epoch, int threads);

  int64_t size() const override { return store_.size(); }
  int64_t src_len(int64_t i) const override { return store_.src_len(i); }
  int64_t tgt_len(int64_t i) const override { return store_.tgt_len(i); }
  void append_src(int64_t i, std::vector<int64_t>& out) const override;
  void append_tgt(int64_t i, std::vector<int64_t>& out) const override;

 private:
  struct Side {
    bool on = false;
    SentencePiece sp;  // a copy: shares the model, outlives moves of the caller's Vocabs
    int nbest = -1;
    double alpha = 0;  // unigram: smoothing; bpe: dropout
  };
  static Side side_of(const SubwordSampling& s, const SentencePiece& sp, const char* key);
  bool tagged(int64_t i) const;
  void append(int64_t i, bool src, std::vector<int64_t>& out) const;
  // Pair i's side as training reads it in `epoch`: the draw, or the best segmentation (empty:
  // the store's ids) when the side does not sample or the draw is over data.max_len.
  std::vector<int> draw(int64_t i, bool src, int64_t epoch) const;

  const TokenStore& store_;
  Side src_, tgt_;
  std::vector<std::pair<int64_t, int64_t>> tagged_;  // pair ranges of tagged corpora
  uint64_t seed_;
  int64_t max_len_;
  int64_t epoch_ = 0;
  std::vector<uint16_t> lengths_;  // epoch_lengths
};

}  // namespace nmt
