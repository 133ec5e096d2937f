#include "data/vocab_sample.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "data/batching.h"
#include "data/corpus.h"
#include "util/line_reader.h"
#include "util/test_hooks.h"
#include "util/util.h"

namespace nmt {

namespace {

// vocab_training_memory's fit (see there).
constexpr int64_t kVocabBytesPerByte = 24;
constexpr int64_t kVocabBytesPerLine = 100;
constexpr int64_t kVocabBaseBytes = 300000000;
// SentencePiece's input_sentence_size as nmt has always given it (see train_one).
constexpr int64_t kSpmSentenceLimit = 2000000;

// A line the vocabulary may be trained on: valid UTF-8 without NUL, not blank, and no longer
// than vocab.max_sentence_length bytes (so that the sample's memory has a bound).
bool usable_line(const std::string& line, int64_t max_bytes) {
  return static_cast<int64_t>(line.size()) <= max_bytes && PairFilter::valid_text(line) &&
         !trim(line).empty();
}

// Algorithm R over the lines offered: the first k in order while there are no more than k,
// then each line so far equally likely to be in the sample. Seeded: the same sample every time.
class Reservoir {
 public:
  explicit Reservoir(int64_t k) : k_(static_cast<size_t>(k)), rng_(0x6E6D7473616D706CULL) {}
  void offer(const std::string& line) {
    ++seen_;
    if (lines_.size() < k_) {
      lines_.push_back(line);
      return;
    }
    const uint64_t j = rng_.below(static_cast<uint64_t>(seen_));
    if (j < k_) lines_[j] = line;
  }
  int64_t seen() const { return seen_; }
  size_t size() const { return lines_.size(); }
  // The sample, one line a '\n'; the lines themselves are let go (one copy, not two).
  std::string take_text() {
    size_t bytes = 0;
    for (const auto& l : lines_) bytes += l.size() + 1;
    std::string out;
    out.reserve(bytes);
    for (auto& l : lines_) {
      out += l;
      out += '\n';
      std::string().swap(l);
    }
    std::vector<std::string>().swap(lines_);
    return out;
  }

 private:
  size_t k_;
  SplitMix64 rng_;
  std::vector<std::string> lines_;
  int64_t seen_ = 0;
};

// Refuses a sample whose training would need more memory than the machine has.
void check_vocab_memory(const Config& c, int64_t bytes, int64_t lines) {
  const int64_t need = vocab_training_memory(bytes, lines);
  const int64_t hooked = test_hooks().memory_available;
  const int64_t have = hooked > 0 ? hooked : available_memory_bytes();
  const double gb = 1e9;
  spdlog::info("vocabulary sample: {} lines, {:.0f} MB of text; training needs about {:.1f} GB "
               "({:.1f} GB available)", lines, bytes / 1e6, need / gb, have / gb);
  if (have <= 0 || need <= have) return;
  throw Error(fmt::format(
      "training the vocabulary on {} sampled lines ({:.0f} MB of text) needs about {:.1f} GB of "
      "memory and {:.1f} GB are available: lower vocab.input_sentence_size (now {}; about {} "
      "lines would fit) or vocab.max_sentence_length (now {}), or give a trained vocab.model",
      lines, bytes / 1e6, need / gb, have / gb, c.vocab.input_sentence_size,
      static_cast<int64_t>(static_cast<double>(lines) * have / need), c.vocab.max_sentence_length));
}

// `user_symbols`: pieces kept whole (the corpus tags, on the source side).
SentencePiece train_one(const Config& c, const std::vector<std::string>& files,
                        const std::string& name, int threads,
                        const std::vector<std::string>& user_symbols) {
  Reservoir sample(c.vocab.input_sentence_size);
  std::string line;
  for (const auto& path : files) {
    LineReader reader(path);
    while (reader.next(line))
      if (usable_line(line, c.vocab.max_sentence_length)) sample.offer(line);
  }
  const auto lines = static_cast<int64_t>(sample.size());
  const std::string text = sample.take_text();
  check_vocab_memory(c, static_cast<int64_t>(text.size()), lines);
  spdlog::info("training SentencePiece {} vocabulary of {} on {} of {} lines -> {}",
               name_of(c.vocab.model_type), c.vocab.size, lines, sample.seen(), name);
  SpmTrainOptions o;
  o.vocab_size = c.vocab.size;
  o.model_type = name_of(c.vocab.model_type);
  o.character_coverage = c.vocab.character_coverage;
  // The sample is nmt's: SentencePiece must take every line of it, not sample again. Its limits
  // are stored in the model file, so they stay at the values nmt always gave (2,000,000 lines,
  // SentencePiece's 4,192 bytes) unless the config asks for more: a corpus smaller than the
  // sample gets the same model bytes as before.
  o.input_sentence_size = std::max<int64_t>(c.vocab.input_sentence_size, kSpmSentenceLimit);
  o.max_sentence_length = std::max(c.vocab.max_sentence_length, o.max_sentence_length);
  o.threads = threads;
  o.user_symbols = user_symbols;
  return SentencePiece::train(text, o);
}

}  // namespace

int64_t vocab_training_memory(int64_t text_bytes, int64_t lines) {
  // SentencePiece's unigram trainer builds a suffix array over every character of the sample
  // (the character array and four int arrays: 20 bytes a character), holds the sentences and
  // their pieces; fitted on measured peaks (docs/data.md).
  return kVocabBytesPerByte * text_bytes + kVocabBytesPerLine * lines + kVocabBaseBytes;
}

Vocabs train_vocabs(const Config& c, int threads) {
  const auto& corpora = c.data.training.corpora;
  std::vector<std::string> src, tgt, both;
  for (const auto& k : corpora) {
    src.push_back(k.src);
    tgt.push_back(k.tgt);
    both.push_back(k.src);
    both.push_back(k.tgt);
  }
  // The tags are source pieces: in the joint vocabulary, or the source one.
  const std::vector<std::string> tags = c.data.training.tags();
  if (c.vocab.joint) {
    auto sp = c.vocab.model.empty() ? train_one(c, both, "spm.model", threads, tags)
                                    : SentencePiece::from_file(c.vocab.model);
    return Vocabs{sp, sp, true};
  }
  // Each side from its file when the config names one, else trained.
  return Vocabs{c.vocab.src_model.empty() ? train_one(c, src, "spm.src.model", threads, tags)
                                          : SentencePiece::from_file(c.vocab.src_model),
                c.vocab.tgt_model.empty() ? train_one(c, tgt, "spm.tgt.model", threads, {})
                                          : SentencePiece::from_file(c.vocab.tgt_model),
                false};
}

}  // namespace nmt
