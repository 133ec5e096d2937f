#include "config/validate.h"

#include <algorithm>

#include "util/util.h"

namespace nmt {

namespace {

// The normalized training data: weights that leave an epoch empty, and text corpora without
// files (only train_src/train_tgt can be empty: data.train's entries are checked as parsed).
void validate_training_data(const DataConfig& d) {
  const TrainingData& t = d.training;
  if (t.from_list && std::none_of(t.corpora.begin(), t.corpora.end(),
                                  [](const CorpusConfig& k) { return k.weight > 0; }))
    throw Error("data.train: every weight is 0; at least one corpus must have a weight > 0");
  if (!t.from_store() &&
      std::any_of(t.corpora.begin(), t.corpora.end(),
                  [](const CorpusConfig& k) { return k.src.empty() || k.tgt.empty(); }))
    throw Error("data.train_src: give data.train_src and data.train_tgt, data.train or "
                "data.train_store");
  if (d.valid_src.empty() != d.valid_tgt.empty())
    throw Error("data.valid_tgt: give both valid_src and valid_tgt, or neither");
}

// Sampling needs a vocabulary with more than one segmentation of a word (a given model's type
// is checked when it is loaded: data/subword_sampling.h).
void validate_sampling(const Config& c) {
  const bool trained = c.vocab.model.empty() && c.vocab.src_model.empty();
  const VocabType type = c.vocab.model_type;
  for (const auto& [key, s] : {std::pair<const char*, const SubwordSampling*>{
                                   "data.src_sampling", &c.data.src_sampling},
                               {"data.tgt_sampling", &c.data.tgt_sampling}})
    if (s->enabled && trained && type != VocabType::kUnigram && type != VocabType::kBpe)
      throw Error(std::string(key) + ".enabled: sampling needs a unigram or bpe vocabulary, " +
                  "vocab.model_type is " + name_of(type));
}

}  // namespace

void validate_cross_fields(const Config& c) {
  if (c.model.arch == Arch::kTransformer && c.model.d_model % c.model.heads != 0)
    throw Error("model.heads: " + std::to_string(c.model.heads) +
                " does not divide model.d_model " + std::to_string(c.model.d_model));
  if (c.model.arch == Arch::kTransformer && c.model.positional == Positional::kSinusoidal &&
      c.model.d_model % 2 != 0)
    throw Error("model.d_model: sinusoidal positions need an even width, got " +
                std::to_string(c.model.d_model));
  if (c.model.arch == Arch::kRnn && c.model.rnn.hidden % 2 != 0)
    throw Error("model.rnn.hidden: the two encoder directions share it, so it must be even, got " +
                std::to_string(c.model.rnn.hidden));
  if (c.model.tie_embeddings == TieEmbeddings::kAll && !c.vocab.joint)
    throw Error("model.tie_embeddings: \"all\" needs vocab.joint = true");
  if (c.vocab.joint && (!c.vocab.src_model.empty() || !c.vocab.tgt_model.empty()))
    throw Error("vocab.src_model: only used when vocab.joint = false (use vocab.model)");
  if (!c.vocab.joint && !c.vocab.model.empty())
    throw Error("vocab.model: only used when vocab.joint = true (use vocab.src_model/tgt_model)");
  if (c.train.batch_tokens <= c.data.max_len)
    throw Error("train.batch_tokens: must exceed data.max_len (" + std::to_string(c.data.max_len) +
                ") so every kept pair fits in a batch, got " +
                std::to_string(c.train.batch_tokens));
  if (c.data.max_len + 2 > c.model.max_positions)
    throw Error("data.max_len: " + std::to_string(c.data.max_len) +
                " needs model.max_positions >= max_len + 2, got " +
                std::to_string(c.model.max_positions));
  if (c.train.max_steps == 0 && c.train.max_epochs == 0 && c.train.max_time.seconds == 0)
    throw Error(
        "train.max_steps: set train.max_steps, train.max_epochs or train.max_time (all are 0)");
  if (c.train.average_last == 1)
    throw Error("train.average_last: 0 (off) or at least 2 checkpoints, got 1");
  if (c.train.average_best && c.train.average_last == 0)
    throw Error("train.average_best: needs train.average_last >= 2");
  if (c.train.average_best && (c.train.valid_every == 0 || c.data.valid_src.empty()))
    throw Error(
        "train.average_best: needs validation during training (train.valid_every > 0 and "
        "data.valid_src/valid_tgt) to rank the checkpoints");
  if (!c.train.average_best && c.train.average_last > c.train.keep_last)
    throw Error(
        "train.average_last: averages the newest checkpoints kept, so it must be <= "
        "train.keep_last (" +
        std::to_string(c.train.keep_last) + "), got " + std::to_string(c.train.average_last));
  if (c.decode.nbest > c.decode.beam_size)
    throw Error("decode.nbest: " + std::to_string(c.decode.nbest) + " exceeds decode.beam_size " +
                std::to_string(c.decode.beam_size));
  validate_training_data(c.data);
  validate_sampling(c);
}

void validate_data_files(const Config& c) {
  // Training files are only looked for here: preparing the store reads them once and refuses
  // aligned files whose line counts differ (counting them at every start would read the whole
  // corpus twice).
  const TrainingData& t = c.data.training;
  if (!t.from_store()) {
    for (size_t i = 0; i < t.corpora.size(); ++i)
      for (const auto& [side, path] :
           {std::pair<const char*, const std::string*>{"src", &t.corpora[i].src},
            {"tgt", &t.corpora[i].tgt}})
        if (!file_exists(*path)) throw Error(t.key(i, side) + ": file not found: " + *path);
  } else if (!file_exists(t.store + "/header.json")) {
    throw Error("data.train_store: not a token store (no header.json): " + t.store);
  }
  for (const auto& [key, path] :
       {std::pair<const char*, const std::string*>{"data.valid_src", &c.data.valid_src},
        {"data.valid_tgt", &c.data.valid_tgt}}) {
    if (!path->empty() && !file_exists(*path))
      throw Error(std::string(key) + ": file not found: " + *path);
  }
  if (!c.data.valid_src.empty()) {
    const int64_t ns = count_lines(c.data.valid_src), nt = count_lines(c.data.valid_tgt);
    if (ns != nt)
      throw Error("data.valid_tgt: line counts differ: " + c.data.valid_src + " has " +
                  std::to_string(ns) + " lines, " + c.data.valid_tgt + " has " +
                  std::to_string(nt));
  }
  for (const auto& [key, path] :
       {std::pair<const char*, const std::string*>{"vocab.model", &c.vocab.model},
        {"vocab.src_model", &c.vocab.src_model},
        {"vocab.tgt_model", &c.vocab.tgt_model}}) {
    if (!path->empty() && !file_exists(*path))
      throw Error(std::string(key) + ": file not found: " + *path);
  }
}

}  // namespace nmt
