#include "data/subword_sampling.h"

#include <algorithm>
#include <exception>
#include <thread>

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

std::vector<int> SampledPairs::draw(int64_t i, bool src, int64_t epoch) const {
  const Side& side = src ? src_ : tgt_;
  if (!side.on) return {};
  std::vector<int> ids =
      side.sp.sample_encode(store_.text(i, src), side.nbest, side.alpha,
                            sampling_seed(seed_, epoch, i, src));
  // A tagged source keeps its tag: the stored ids' first.
  if (src && tagged(i)) {
    std::vector<int64_t> stored;
    store_.append_src(i, stored);
    ids.insert(ids.begin(), static_cast<int>(stored.front()));
  }
  if (static_cast<int64_t>(ids.size()) > max_len_) return {};
  return ids;
}

void SampledPairs::append(int64_t i, bool src, std::vector<int64_t>& out) const {
  const std::vector<int> ids = draw(i, src, epoch_);
  if (!ids.empty())
    out.insert(out.end(), ids.begin(), ids.end());
  else
    src ? store_.append_src(i, out) : store_.append_tgt(i, out);
}

const uint16_t* SampledPairs::epoch_lengths(int64_t epoch, int threads) {
  const int64_t n = store_.size();
  lengths_.resize(static_cast<size_t>(2 * n));
  auto work = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (const bool src : {true, false}) {
        const size_t ids = draw(i, src, epoch).size();
        lengths_[2 * i + (src ? 0 : 1)] =
            ids > 0 ? static_cast<uint16_t>(ids)
                    : static_cast<uint16_t>(src ? store_.src_len(i) : store_.tgt_len(i));
      }
  };
  // Each draw seeds its thread's generator, so the lengths do not depend on the threads.
  const int64_t parts = std::max(1, threads);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(parts));
  auto part = [&](int64_t t) {
    try {
      work(n * t / parts, n * (t + 1) / parts);
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < parts; ++t) pool.emplace_back(part, t);
  part(0);
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return lengths_.data();
}

void SampledPairs::append_src(int64_t i, std::vector<int64_t>& out) const { append(i, true, out); }

void SampledPairs::append_tgt(int64_t i, std::vector<int64_t>& out) const {
  append(i, false, out);
}

}  // namespace nmt
