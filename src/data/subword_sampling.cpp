#include "data/subword_sampling.h"

#include "data/batching.h"
#include "util/util.h"

namespace nmt {

uint64_t sampling_seed(uint64_t seed, int64_t epoch, int64_t pair, bool src) {
  SplitMix64 mix(epoch_seed(seed, epoch) ^ 0x5AB5A3B1E0ULL);
  mix = SplitMix64(mix.next() + static_cast<uint64_t>(pair) * 2 + (src ? 0 : 1));
  return mix.next();
}

SampledPairs::Side SampledPairs::side_of(const SubwordSampling& s, const SentencePiece& sp,
                                         const char* key) {
  Side side;
  if (!s.enabled) return side;
  side.on = true;
  side.sp = sp;
  switch (sp.model_type()) {
    case SpmModelType::kUnigram:
      side.nbest = static_cast<int>(s.nbest);
      side.alpha = s.alpha;
      break;
    case SpmModelType::kBpe:
      side.alpha = s.dropout;
      break;
    default:
      throw Error(std::string(key) +
                  ".enabled: sampling needs a unigram or bpe vocabulary; this one is char or word");
  }
  return side;
}

SampledPairs::SampledPairs(const TokenStore& store, const Vocabs& vocabs, const DataConfig& data,
                           uint64_t seed)
    : store_(store),
      src_(side_of(data.src_sampling, vocabs.src, "data.src_sampling")),
      tgt_(side_of(data.tgt_sampling, vocabs.tgt, "data.tgt_sampling")),
      seed_(seed),
      max_len_(data.max_len) {
  if (!store.has_text())
    throw Error(std::string(data.src_sampling.enabled ? "data.src_sampling" : "data.tgt_sampling") +
                ": the token store " + store.dir() +
                " keeps no text to sample segmentations from; prepare it again with sampling "
                "on (nmt prepare with this config)");
  for (const auto& input : store.header().inputs)
    if (!input.tag.empty()) tagged_.emplace_back(input.begin, input.end);
}

bool SampledPairs::tagged(int64_t i) const {
  for (const auto& [begin, end] : tagged_)
    if (i >= begin && i < end) return true;
  return false;
}

void SampledPairs::append(int64_t i, bool src, std::vector<int64_t>& out) const {
  const Side& side = src ? src_ : tgt_;
  const size_t start = out.size();
  if (side.on) {
    const std::vector<int> ids = side.sp.sample_encode(store_.text(i, src), side.nbest,
                                                        side.alpha,
                                                        sampling_seed(seed_, epoch_, i, src));
    // A tagged source keeps its tag: the stored ids' first.
    const bool tag = src && tagged(i);
    if (static_cast<int64_t>(ids.size()) + (tag ? 1 : 0) <= max_len_) {
      if (tag) {
        store_.append_src(i, out);
        out.resize(start + 1);
      }
      out.insert(out.end(), ids.begin(), ids.end());
      return;
    }
  }
  src ? store_.append_src(i, out) : store_.append_tgt(i, out);
}

void SampledPairs::append_src(int64_t i, std::vector<int64_t>& out) const { append(i, true, out); }

void SampledPairs::append_tgt(int64_t i, std::vector<int64_t>& out) const {
  append(i, false, out);
}

}  // namespace nmt
