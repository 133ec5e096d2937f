// Subword regularization (data.src_sampling, data.tgt_sampling): the training pairs with each
// side segmented anew each time it is read, from the text the token store keeps beside the ids.
//
// A draw is a function of (train.seed, epoch, pair, side) alone, so a resumed run draws what
// the uninterrupted one drew, and data-parallel processes draw what one process would. Nothing
// is held per epoch: a batch's sentences are encoded when the batch is built. Batches are
// planned from the best segmentation's lengths; a drawn one is usually a little longer, so a
// batch may exceed train.batch_tokens by that much. A draw longer than data.max_len is
// replaced by the best segmentation.
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

  const TokenStore& store_;
  Side src_, tgt_;
  std::vector<std::pair<int64_t, int64_t>> tagged_;  // pair ranges of tagged corpora
  uint64_t seed_;
  int64_t max_len_;
  int64_t epoch_ = 0;
};

}  // namespace nmt
