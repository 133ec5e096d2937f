// Typed configuration: one struct per JSON section, one comment and one default per field.
// The keys are listed once (schema.h), read and checked by parse.h (with validate.h), written
// back by print.h; nothing downstream looks options up by string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

// Closed sets of choices: an enum each, whose JSON spellings are listed once (config.cpp), so a
// config is parsed into them once and the code compares enums, never text.
enum class Arch { kTransformer, kRnn };
enum class VocabType { kUnigram, kBpe, kChar, kWord };
enum class TieEmbeddings { kNone, kDecoder, kAll };
enum class Positional { kSinusoidal, kLearned };
enum class Norm { kPost, kPre };
enum class RnnCell { kGru, kLstm };
enum class RnnAttentionKind { kBahdanau, kLuongDot, kLuongGeneral };
// What train.precision and --precision ask for; model/device.h resolves it on a device.
enum class PrecisionSetting { kFp32, kBf16, kFp16, kAuto };
enum class LrSchedule { kNoam, kInverseSqrt, kConstant };
enum class BestMetric { kBleu, kChrf, kLoss };
// The decoding flags' choices: how CPU threads share a chunk (--parallel), which word
// alignments translate writes (--alignment; kNone: no flag), whether the output projection is
// quantized (--quantize; kNone: no flag), and how an export stores weights (--quantization,
// CTranslate2's converter's types).
enum class Parallel { kAuto, kBatches, kOps };
enum class AlignmentMode { kNone, kHard, kSoft };
// Which decoder step's cross-attention aligns a target piece (--alignment-step): the step that
// predicts it, or the step that consumes it as input (Shift-Att, Chen et al. 2020).
enum class AlignmentStep { kPredict, kConsume };
enum class Quantize { kNone, kInt8 };
enum class Ct2Quantization { kFloat32, kInt8, kInt16, kFloat16 };
enum class ExportFormat { kCTranslate2 };
// What one unit of translate's input is (--format): a sentence a line, a paragraph of text, or
// a paragraph of HTML.
enum class InputFormat { kLines, kText, kHtml };

// BLEU and chrF improve upwards, the loss downwards.
inline bool higher_is_better(BestMetric m) { return m != BestMetric::kLoss; }

// The JSON spelling of a choice ("transformer").
template <class E>
const char* name_of(E value);
// The choice spelled `text`; throws Error "WHAT: must be one of "a", "b", got "x"".
template <class E>
E parse_choice(const std::string& text, const std::string& what);
// Every spelling of E, in order: "a", "b" (for messages and help).
template <class E>
std::string choice_list();

// A length of time. In JSON a number of seconds or a string of numbers with units, as in "90s",
// "45m", "2h", "1h30m" or "1.5d" (parse_duration).
struct Duration {
  double seconds = 0;
};

// Seconds in a duration string: one or more NUMBER UNIT parts (units s, m, h, d; a bare number
// is seconds). Throws Error on anything else, negative numbers included.
double parse_duration(const std::string& text);

// One training corpus of data.train: a pair of aligned files and its share of an epoch.
struct CorpusConfig {
  std::string src;      // source file (plain or gzip), one sentence a line
  std::string tgt;      // target file, aligned line by line with src
  double weight = 1.0;  // pairs an epoch takes: weight x the corpus's size (0 = none)
  std::string tag;      // a vocabulary piece whose id starts each source sentence ("" = none)
};

// The training data as every stage after the parser sees it, whichever keys named it: text
// corpora (data.train, or data.train_src/train_tgt as one corpus of weight 1), or a token store
// (data.train_store). parse_config fills it once; nothing else reads those keys.
struct TrainingData {
  // The text corpora in order. With a store: data.train's entries, whose weights apply to the
  // store's corpora in order (none: weight 1 each).
  std::vector<CorpusConfig> corpora;
  std::string store;       // a token store made by nmt prepare ("" = prepare the text corpora)
  bool from_list = false;  // named by data.train rather than data.train_src/train_tgt

  bool from_store() const { return !store.empty(); }
  // The JSON path of corpus i's side ("src" or "tgt") as the config spelled it, for messages.
  std::string key(size_t i, const std::string& side) const {
    return from_list ? "data.train[" + std::to_string(i) + "]." + side : "data.train_" + side;
  }
  // The corpora's weights in order (empty with a store and no data.train).
  std::vector<double> weights() const {
    std::vector<double> w;
    for (const auto& k : corpora) w.push_back(k.weight);
    return w;
  }
  // The corpora's distinct tags, sorted ("" left out): the source vocabulary's user-defined
  // pieces.
  std::vector<std::string> tags() const;
};

// Subword regularization of one side of the training data: each time a training sentence is
// read, a segmentation drawn from the vocabulary instead of its best one. Validation, eval and
// translation always use the best segmentation.
struct SubwordSampling {
  bool enabled = false;  // draw a segmentation each time a training sentence is read
  double alpha = 0.1;    // unigram: smoothing of the draw (small = flatter; large = the best)
  int64_t nbest = -1;    // unigram: draw among the nbest best segmentations (-1 = all of them)
  double dropout = 0.1;  // bpe: probability that each merge is skipped (BPE-dropout)
};

struct DataConfig {
  // Three spellings of the training data, kept as given so the config prints back as written;
  // read `training` instead.
  std::string train_src = "data/quickstart/train.en";  // training source, one sentence a line
  std::string train_tgt = "data/quickstart/train.de";  // training target, aligned with train_src
  std::vector<CorpusConfig> train;  // several weighted corpora instead of train_src/train_tgt
  std::string train_store;  // a store made by nmt prepare, instead of the text files ("" = none)
  std::string cache_dir;    // where text is prepared into a store ("" = the run directory)
  bool in_memory = false;   // copy the store's ids into memory instead of mapping them
  std::string valid_src = "data/quickstart/valid.en";  // validation source ("" = no validation)
  std::string valid_tgt = "data/quickstart/valid.de";  // validation target
  int64_t max_len = 128;  // drop training pairs with more pieces than this on either side
  double max_len_ratio = 0;  // drop pairs whose longer side has more than this x the shorter's
  bool dedup = false;        // drop pairs identical to an earlier pair
  SubwordSampling src_sampling;  // subword regularization of training sources
  SubwordSampling tgt_sampling;  // subword regularization of training targets
  TrainingData training;     // the spellings above, normalized by parse_config (not a JSON key)
};

struct VocabConfig {
  bool joint = true;                      // one SentencePiece model for both languages
  int64_t size = 8000;                    // vocabulary size when training a model
  VocabType model_type = VocabType::kUnigram;  // unigram | bpe | char | word
  double character_coverage = 1.0;        // share of characters the model must cover
  int64_t input_sentence_size = 600000;   // sentences sampled to train the vocabulary
  int64_t max_sentence_length = 2048;     // longer lines (bytes) are left out of that sample
  std::string model;      // existing joint model (.model); "" = train one into the run dir
  std::string src_model;  // existing source model when joint = false; "" = train one
  std::string tgt_model;  // existing target model when joint = false; "" = train one
};

// The recurrent encoder-decoder's own keys (model.rnn, used when model.arch = "rnn").
struct RnnConfig {
  RnnCell cell = RnnCell::kGru;        // gru | lstm
  int64_t hidden = 512;                // decoder state width = both encoder directions together
  int64_t layers = 1;                  // encoder and decoder depth
  RnnAttentionKind attention = RnnAttentionKind::kBahdanau;  // bahdanau | luong_dot | luong_general
};

struct ModelConfig {
  Arch arch = Arch::kTransformer;  // model family: transformer | rnn
  // Shared by both families.
  int64_t d_model = 512;         // width of embeddings (and, for rnn, of the attentional vector)
  double dropout = 0.1;          // dropout on embeddings and outputs of blocks / layers
  int64_t max_positions = 1024;  // longest sequence the model takes
  TieEmbeddings tie_embeddings = TieEmbeddings::kAll;  // none | decoder | all (joint vocab)
  // Transformer only.
  int64_t heads = 8;                      // attention heads; must divide d_model
  int64_t encoder_layers = 6;             // encoder depth
  int64_t decoder_layers = 6;             // decoder depth
  int64_t d_ff = 2048;                    // inner width of the feed-forward blocks
  double attention_dropout = 0.1;         // dropout on attention weights
  double activation_dropout = -1.0;       // dropout on the feed-forward ReLU (-1 = dropout)
  Positional positional = Positional::kSinusoidal;  // sinusoidal | learned
  Norm norm = Norm::kPost;  // post (the paper's) | pre (with a final LayerNorm)
  // RNN only.
  RnnConfig rnn;
};

struct TrainConfig {
  int64_t max_steps = 0;   // stop after this many optimizer steps (0 = no limit)
  int64_t max_epochs = 0;  // stop after this many passes over the data (0 = no limit)
  Duration max_time;       // stop when training time, across resumes, reaches this (0 = no limit)
  int64_t seed = 1;        // seed for initialisation, shuffling and dropout
  int64_t threads = 0;     // intra-op CPU threads (0 = all cores)
  std::string device = "auto";       // auto (CUDA when available, else CPU) | cpu | cuda | cuda:N
  PrecisionSetting precision = PrecisionSetting::kFp32;  // fp32 | bf16 | fp16 | auto
  int64_t log_every = 100;           // steps between log lines and metrics.jsonl rows
  int64_t save_every = 1000;         // steps between checkpoints (a final one is always written)
  int64_t keep_last = 5;             // checkpoints kept in DIR/checkpoints
  int64_t average_last = 0;          // checkpoints averaged into .../averaged at the end (0 = off)
  bool average_best = false;         // average the best average_last by validation, not the newest
  int64_t batch_tokens = 4096;       // token budget of a batch: rows x padded width
  int64_t accum_steps = 1;           // batches whose gradients are summed per optimizer step
  LrSchedule lr_schedule = LrSchedule::kNoam;  // noam | inverse_sqrt | constant
  int64_t warmup_steps = 4000;       // warm-up steps of every schedule
  double lr_factor = 1.0;            // Noam scale: lr = factor * d^-0.5 * min(s^-0.5, s * w^-1.5)
  double lr = 5e-4;                  // peak rate of inverse_sqrt and constant
  double cooldown = 0.0;             // last share of the run (by max_steps/max_time) with lr -> 0
  double adam_beta1 = 0.9;           // Adam beta1
  double adam_beta2 = 0.98;          // Adam beta2
  double adam_eps = 1e-9;            // Adam epsilon
  double label_smoothing = 0.1;      // probability mass spread over the vocabulary
  double clip_norm = 1.0;            // global gradient-norm clip (0 = off)
  int64_t valid_every = 0;           // steps between validation passes (0 = only at the end)
  int64_t valid_beam = 1;            // beam size for validation BLEU (1 = greedy)
  BestMetric best_metric = BestMetric::kBleu;  // bleu | chrf | loss: picks checkpoints/best
  int64_t patience = 0;        // stop after this many validations without improvement (0 = off)
  int64_t max_bad_steps = 5;   // stop after this many non-finite steps in a row (each skipped)
  bool auto_resume = true;     // under torchrun: resume from the run's newest checkpoint if any
  int64_t dist_timeout = 300;  // seconds a data-parallel collective may wait for the other ranks
};

struct DecodeConfig {
  double max_len_a = 1.5;       // output length limit: a * source_length + b
  int64_t max_len_b = 10;       // output length limit: a * source_length + b
  int64_t batch_tokens = 4096;  // source-token budget of a translation batch
  int64_t beam_size = 5;        // hypotheses kept per sentence (1 = greedy)
  double length_penalty = 0.6;  // GNMT alpha: score = log P / ((5 + |Y|) / 6)^alpha (0 = none)
  int64_t nbest = 1;            // hypotheses written per sentence (<= beam_size)
};

struct Config {
  DataConfig data;
  VocabConfig vocab;
  ModelConfig model;
  TrainConfig train;
  DecodeConfig decode;
};

// True for the device names train.device and --device take: auto, cpu, cuda, cuda:N.
bool is_device_name(const std::string& name);

// Effective thread count: train.threads, or all cores when it is 0.
int effective_threads(const Config& config);

}  // namespace nmt
