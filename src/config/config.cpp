#include "config/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "util/util.h"

namespace nmt {

using nlohmann::json;

namespace {

// Keys and values as they appear in messages: long ones are cut, so a message stays readable.
std::string clip(std::string s, size_t max = 60) {
  if (s.size() <= max) return s;
  size_t cut = max - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // whole chars
  return s.substr(0, cut) + "...";
}

template <class E>
using Choices = std::vector<std::pair<E, const char*>>;

template <class E>
const Choices<E>& choices();
template <>
const Choices<Arch>& choices() {
  static const Choices<Arch> c = {{Arch::kTransformer, "transformer"}, {Arch::kRnn, "rnn"}};
  return c;
}
template <>
const Choices<VocabType>& choices() {
  static const Choices<VocabType> c = {{VocabType::kUnigram, "unigram"},
                                       {VocabType::kBpe, "bpe"},
                                       {VocabType::kChar, "char"},
                                       {VocabType::kWord, "word"}};
  return c;
}
template <>
const Choices<TieEmbeddings>& choices() {
  static const Choices<TieEmbeddings> c = {
      {TieEmbeddings::kNone, "none"}, {TieEmbeddings::kDecoder, "decoder"}, {TieEmbeddings::kAll, "all"}};
  return c;
}
template <>
const Choices<Positional>& choices() {
  static const Choices<Positional> c = {{Positional::kSinusoidal, "sinusoidal"},
                                        {Positional::kLearned, "learned"}};
  return c;
}
template <>
const Choices<Norm>& choices() {
  static const Choices<Norm> c = {{Norm::kPost, "post"}, {Norm::kPre, "pre"}};
  return c;
}
template <>
const Choices<RnnCell>& choices() {
  static const Choices<RnnCell> c = {{RnnCell::kGru, "gru"}, {RnnCell::kLstm, "lstm"}};
  return c;
}
template <>
const Choices<RnnAttentionKind>& choices() {
  static const Choices<RnnAttentionKind> c = {{RnnAttentionKind::kBahdanau, "bahdanau"},
                                              {RnnAttentionKind::kLuongDot, "luong_dot"},
                                              {RnnAttentionKind::kLuongGeneral, "luong_general"}};
  return c;
}
template <>
const Choices<PrecisionSetting>& choices() {
  static const Choices<PrecisionSetting> c = {{PrecisionSetting::kFp32, "fp32"},
                                              {PrecisionSetting::kBf16, "bf16"},
                                              {PrecisionSetting::kFp16, "fp16"},
                                              {PrecisionSetting::kAuto, "auto"}};
  return c;
}
template <>
const Choices<LrSchedule>& choices() {
  static const Choices<LrSchedule> c = {{LrSchedule::kNoam, "noam"},
                                        {LrSchedule::kInverseSqrt, "inverse_sqrt"},
                                        {LrSchedule::kConstant, "constant"}};
  return c;
}
template <>
const Choices<BestMetric>& choices() {
  static const Choices<BestMetric> c = {
      {BestMetric::kBleu, "bleu"}, {BestMetric::kChrf, "chrf"}, {BestMetric::kLoss, "loss"}};
  return c;
}

// A value check: returns an error text, or nullopt when the value is fine.
template <class T>
using Check = std::function<std::optional<std::string>(const T&)>;

Check<int64_t> at_least(int64_t lo) {
  return [lo](const int64_t& v) -> std::optional<std::string> {
    if (v < lo) return "must be >= " + std::to_string(lo) + ", got " + std::to_string(v);
    return std::nullopt;
  };
}

Check<int64_t> int_range(int64_t lo, int64_t hi) {
  return [lo, hi](const int64_t& v) -> std::optional<std::string> {
    if (v < lo || v > hi)
      return "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
             std::to_string(v);
    return std::nullopt;
  };
}

Check<double> in_range(double lo, double hi, bool hi_inclusive = true) {
  return [=](const double& v) -> std::optional<std::string> {
    if (!std::isfinite(v) || v < lo || (hi_inclusive ? v > hi : v >= hi)) {
      std::ostringstream os;
      os << "must be in [" << lo << ", " << hi << (hi_inclusive ? "]" : ")") << ", got " << v;
      return os.str();
    }
    return std::nullopt;
  };
}

// A device name as train.device and --device take it: auto | cpu | cuda | cuda:N.
Check<std::string> device_name() {
  return [](const std::string& v) -> std::optional<std::string> {
    if (is_device_name(v)) return std::nullopt;
    return "must be \"auto\", \"cpu\", \"cuda\" or \"cuda:N\", got \"" + clip(v) + "\"";
  };
}

Check<Duration> duration_at_most(double max_seconds) {
  return [max_seconds](const Duration& v) -> std::optional<std::string> {
    if (std::isfinite(v.seconds) && v.seconds >= 0 && v.seconds <= max_seconds) return std::nullopt;
    std::ostringstream os;
    os << "must be in [0, " << max_seconds << "] seconds, got " << v.seconds;
    return os.str();
  };
}

template <class T>
Check<T> any() {
  return [](const T&) -> std::optional<std::string> { return std::nullopt; };
}

// The schema, written once: each visitor (parser, printer, documenter) walks the same fields.
Check<std::string> not_empty() {
  return [](const std::string& v) -> std::optional<std::string> {
    if (v.empty()) return std::string("must not be empty");
    return std::nullopt;
  };
}

template <class V>
void visit(CorpusConfig& c, V& v) {
  v("src", c.src, "source file (plain text or gzip), one sentence a line", not_empty());
  v("tgt", c.tgt, "target file, aligned line by line with src", not_empty());
  v("weight", c.weight,
    "an epoch takes weight x the corpus's pairs: whole copies, then a sample for the fraction "
    "(0 = none)",
    in_range(0.0, 1e6));
}

template <class V>
void visit(DataConfig& c, V& v) {
  v("train_src", c.train_src, "training source file (plain text or gzip), one sentence a line",
    any<std::string>());
  v("train_tgt", c.train_tgt, "training target file, aligned line by line with train_src",
    any<std::string>());
  v.list("train", c.train,
         "several training corpora, each {src, tgt, weight}, instead of train_src/train_tgt");
  v("train_store", c.train_store,
    "a token store made by nmt prepare to train on instead of the text files (\"\" = none)",
    any<std::string>());
  v("cache_dir", c.cache_dir,
    "where nmt train prepares the text into a token store, shared by runs with the same data "
    "(\"\" = the run directory)",
    any<std::string>());
  v("in_memory", c.in_memory,
    "copy the token store's ids into memory instead of mapping the file (memory grows with the "
    "corpus)",
    any<bool>());
  v("valid_src", c.valid_src, "validation source file (\"\" = no validation)", any<std::string>());
  v("valid_tgt", c.valid_tgt, "validation target file", any<std::string>());
  v("max_len", c.max_len, "drop training pairs with more pieces than this on either side",
    int_range(1, 65535));
  v("max_len_ratio", c.max_len_ratio,
    "drop training pairs whose longer side has more than this times the pieces of the shorter "
    "(0 = off)",
    Check<double>([](const double& v) -> std::optional<std::string> {
      if (v == 0.0 || (v >= 1.0 && v <= 1e6)) return std::nullopt;
      std::ostringstream os;
      os << "must be 0 (off) or in [1, 1e6], got " << v;
      return os.str();
    }));
  v("dedup", c.dedup, "drop training pairs identical to an earlier pair (by a 64-bit hash)",
    any<bool>());
}

template <class V>
void visit(VocabConfig& c, V& v) {
  v("joint", c.joint, "one SentencePiece model shared by source and target", any<bool>());
  v("size", c.size, "vocabulary size when a model is trained", at_least(8));
  v("model_type", c.model_type, "SentencePiece model type: unigram | bpe | char | word",
    any<VocabType>());
  v("character_coverage", c.character_coverage,
    "share of characters the vocabulary must cover (0.98 for CJK)", in_range(0.5, 1.0));
  v("input_sentence_size", c.input_sentence_size, "sentences sampled to train the vocabulary",
    at_least(1));
  v("max_sentence_length", c.max_sentence_length,
    "longer lines (in bytes) are left out of the vocabulary's sample", at_least(1));
  v("model", c.model, "existing joint .model file; \"\" = train one into the run directory",
    any<std::string>());
  v("src_model", c.src_model, "existing source .model when joint = false; \"\" = train one",
    any<std::string>());
  v("tgt_model", c.tgt_model, "existing target .model when joint = false; \"\" = train one",
    any<std::string>());
}

template <class V>
void visit(RnnConfig& c, V& v) {
  v("cell", c.cell, "recurrent cell of encoder and decoder: gru | lstm", any<RnnCell>());
  v("hidden", c.hidden, "decoder state width; each encoder direction has half of it (must be even)",
    at_least(2));
  v("layers", c.layers, "encoder layers (bidirectional) and decoder layers", at_least(1));
  v("attention", c.attention,
    "bahdanau (additive: v . tanh(W s + U h)) | luong_dot (s . h) | luong_general (s . W h)",
    any<RnnAttentionKind>());
}

template <class V>
void visit(ModelConfig& c, V& v) {
  v("arch", c.arch, "model family: transformer | rnn (bidirectional encoder, attention decoder)",
    any<Arch>());
  v("d_model", c.d_model,
    "width of embeddings and hidden states (rnn: embeddings and the attentional vector)",
    at_least(2));
  v("dropout", c.dropout,
    "dropout on embeddings, residual branches and (unless activation_dropout) the ReLU output "
    "(rnn: embeddings, between layers, the attentional vector)",
    in_range(0.0, 1.0, false));
  v("max_positions", c.max_positions,
    "longest sequence the model takes (transformer: the position table)", at_least(2));
  v("tie_embeddings", c.tie_embeddings,
    "none | decoder (decoder input and output) | all (also the encoder; needs a joint vocab)",
    any<TieEmbeddings>());
  v.for_arch(Arch::kTransformer, c.arch, [&] {
    v("heads", c.heads, "attention heads; must divide d_model", at_least(1));
    v("encoder_layers", c.encoder_layers, "encoder layers", at_least(1));
    v("decoder_layers", c.decoder_layers, "decoder layers", at_least(1));
    v("d_ff", c.d_ff, "inner width of the feed-forward blocks", at_least(1));
    v("attention_dropout", c.attention_dropout, "dropout on attention weights",
      in_range(0.0, 1.0, false));
    v("activation_dropout", c.activation_dropout,
      "dropout on the ReLU output inside the feed-forward blocks (fairseq's activation_dropout); "
      "-1 = model.dropout",
      Check<double>([](const double& v) -> std::optional<std::string> {
        if (v == -1.0 || (v >= 0.0 && v < 1.0)) return std::nullopt;
        std::ostringstream os;
        os << "must be -1 (= model.dropout) or in [0, 1), got " << v;
        return os.str();
      }));
    v("positional", c.positional, "position encoding: sinusoidal | learned",
      any<Positional>());
    v("norm", c.norm, "post (the paper's) | pre (LayerNorm before each block, plus a final one)",
      any<Norm>());
  });
  v.for_arch(Arch::kRnn, c.arch, [&] { v.section("rnn", c.rnn); });
}

template <class V>
void visit(TrainConfig& c, V& v) {
  v("max_steps", c.max_steps, "stop after this many optimizer steps (0 = no limit)", at_least(0));
  v("max_epochs", c.max_epochs, "stop after this many passes over the data (0 = no limit)",
    at_least(0));
  v("max_time", c.max_time,
    "stop when the training time (across --resume) reaches this, with a final validation and "
    "checkpoint: seconds, or a string such as \"90s\", \"45m\", \"2h\", \"1h30m\" (0 = no "
    "limit)",
    duration_at_most(10 * 365 * 86400.0));
  v("seed", c.seed, "seed for initialisation, shuffling and dropout", at_least(0));
  v("threads", c.threads, "intra-op CPU threads (0 = all cores)", at_least(0));
  v("device", c.device,
    "auto (CUDA when available, else the CPU) | cpu | cuda | cuda:N (--device overrides it)",
    device_name());
  v("precision", c.precision,
    "fp32 | bf16 | fp16 | auto: mixed precision by CUDA autocast, weights and Adam state stay "
    "fp32, the loss in fp32; fp16 adds dynamic loss scaling. On the CPU, bf16 runs the linear "
    "layers' products in bfloat16 (AVX512-BF16 CPUs), all else in fp32. auto: bf16 on a CPU "
    "with AVX512-BF16, else fp32 (CUDA included)",
    any<PrecisionSetting>());
  v("log_every", c.log_every, "steps between log lines and metrics.jsonl rows, plus one at the end",
    at_least(1));
  v("save_every", c.save_every, "steps between checkpoints (a final one is always written)",
    at_least(1));
  v("keep_last", c.keep_last, "checkpoints kept under DIR/checkpoints", at_least(1));
  v("average_last", c.average_last,
    "at the end of training, average the weights of this many checkpoints into "
    "DIR/checkpoints/averaged and validate it; --checkpoint DIR then takes the better of best and "
    "averaged (0 = off, else >= 2)",
    at_least(0));
  v("average_best", c.average_best,
    "average the average_last checkpoints with the best validation best_metric instead of the "
    "newest (they are kept beside keep_last; needs valid_every)",
    any<bool>());
  v("batch_tokens", c.batch_tokens,
    "token budget of one batch: rows x padded width (must be > data.max_len)", at_least(2));
  v("accum_steps", c.accum_steps, "batches whose gradients are summed per optimizer step",
    at_least(1));
  v("lr_schedule", c.lr_schedule,
    "noam: factor * d_model^-0.5 * min(s^-0.5, s * w^-1.5) | inverse_sqrt: lr * min(s / w, "
    "sqrt(w / s)) | constant: lr * min(1, s / w) (s the step, w warmup_steps)",
    any<LrSchedule>());
  v("warmup_steps", c.warmup_steps, "warm-up steps of the learning-rate schedule", at_least(1));
  v("lr_factor", c.lr_factor, "noam's scale factor", in_range(0.0, 1e6));
  v("lr", c.lr, "peak learning rate of inverse_sqrt and constant", in_range(0.0, 1e3));
  v("cooldown", c.cooldown,
    "share of the run, at its end, over which the schedule's rate falls linearly to zero; the run "
    "ends at max_steps, max_epochs or max_time, whichever comes first (0 = no cool-down)",
    in_range(0.0, 1.0));
  v("adam_beta1", c.adam_beta1, "Adam beta1", in_range(0.0, 1.0, false));
  v("adam_beta2", c.adam_beta2, "Adam beta2", in_range(0.0, 1.0, false));
  v("adam_eps", c.adam_eps, "Adam epsilon", in_range(0.0, 1.0));
  v("label_smoothing", c.label_smoothing, "probability mass spread over the vocabulary",
    in_range(0.0, 1.0, false));
  v("clip_norm", c.clip_norm, "clip the global gradient norm to this (0 = off)",
    in_range(0.0, 1e9));
  v("valid_every", c.valid_every,
    "steps between validation passes: loss, perplexity and BLEU (0 = only at the end)",
    at_least(0));
  v("valid_beam", c.valid_beam, "beam size for validation BLEU (1 = greedy)", at_least(1));
  v("best_metric", c.best_metric,
    "what picks DIR/checkpoints/best: validation bleu, chrf (higher is better) or loss",
    any<BestMetric>());
  v("patience", c.patience,
    "stop after this many validations without improvement of best_metric (0 = off)", at_least(0));
  v("max_bad_steps", c.max_bad_steps,
    "stop with an error after this many consecutive steps with a non-finite loss or gradient "
    "norm (each is skipped)",
    at_least(1));
  v("auto_resume", c.auto_resume,
    "under torchrun: continue from the run directory's newest complete checkpoint when it has "
    "one, as a restarted worker group must (--resume is then implied)",
    any<bool>());
  v("dist_timeout", c.dist_timeout,
    "seconds a data-parallel collective (or the rendezvous) waits for the other ranks before "
    "failing the group",
    int_range(1, 86400));
}

template <class V>
void visit(DecodeConfig& c, V& v) {
  v("max_len_a", c.max_len_a, "output length limit: a * source_length + b", in_range(0.0, 1e3));
  v("max_len_b", c.max_len_b, "output length limit: a * source_length + b", at_least(0));
  v("batch_tokens", c.batch_tokens, "source-token budget of one translation batch", at_least(1));
  v("beam_size", c.beam_size, "hypotheses kept per sentence during search (1 = greedy)",
    at_least(1));
  v("length_penalty", c.length_penalty,
    "GNMT length penalty alpha: score = log P / ((5 + |Y|) / 6)^alpha, |Y| with EOS (0 = none)",
    in_range(0.0, 10.0));
  v("nbest", c.nbest, "hypotheses written per sentence (at most beam_size)", at_least(1));
}

template <class V>
void visit(Config& c, V& v) {
  v.section("data", c.data);
  v.section("vocab", c.vocab);
  v.section("model", c.model);
  v.section("train", c.train);
  v.section("decode", c.decode);
}

// Configs nest two levels. Deeper input is refused while parsing: it is never a config, and
// printing it back in an error message would recurse once per level.
constexpr int kMaxJsonDepth = 32;

// Parses JSON text with the depth limit. Throws json::exception on malformed text and Error on
// depth.
json parse_json(const std::string& text) {
  return json::parse(text, [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth)
      throw Error("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return true;
  });
}

std::string type_name(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();
}

// A --set value may hold bytes that are not UTF-8; they print as U+FFFD.
std::string short_dump(const json& j) {
  return clip(j.dump(-1, ' ', false, json::error_handler_t::replace), 40);
}

// A field's value in JSON: durations as seconds, which parse back.
template <class T>
json to_json_value(const T& field) {
  if constexpr (std::is_enum_v<T>) {
    return name_of(field);
  } else if constexpr (std::is_same_v<T, Duration>) {
    return field.seconds;
  } else {
    return field;
  }
}

// Reads a JSON object into a struct, field by field, recording which keys it knew.
class Parser {
 public:
  Parser(const json& object, std::string path) : object_(object), path_(std::move(path)) {}

  template <class S>
  void section(const std::string& name, S& target) {
    known_.push_back(name);
    auto it = object_.find(name);
    if (it == object_.end()) return;
    refuse_foreign(name);
    Parser sub(*it, join(name));
    sub.expect_object();
    visit(target, sub);
    sub.reject_unknown();
  }

  template <class T>
  void operator()(const std::string& name, T& field, const char*, const Check<T>& check) {
    known_.push_back(name);
    auto it = object_.find(name);
    if (it == object_.end()) return;
    refuse_foreign(name);
    const std::string path = join(name);
    T value = convert<T>(*it, path);
    if (auto problem = check(value)) throw Error(path + ": " + *problem);
    field = std::move(value);
  }

  // An array of objects, each read as a section.
  template <class S>
  void list(const std::string& name, std::vector<S>& target, const char*) {
    known_.push_back(name);
    auto it = object_.find(name);
    if (it == object_.end()) return;
    refuse_foreign(name);
    if (!it->is_array()) throw wrong_type(join(name), "a list", *it);
    std::vector<S> out;
    for (size_t i = 0; i < it->size(); ++i) {
      Parser sub((*it)[i], join(name) + "[" + std::to_string(i) + "]");
      sub.expect_object();
      S element;
      visit(element, sub);
      sub.reject_unknown();
      out.push_back(std::move(element));
    }
    target = std::move(out);
  }

  // Keys of one model family: read when `arch` is the configured one (`active`), else known but
  // refused when present, so a key of the other family is never silently ignored.
  template <class F>
  void for_arch(Arch arch, Arch active, F&& fields) {
    if (arch != active) foreign_ = {name_of(arch), name_of(active)};
    fields();
    foreign_.reset();
  }

  void expect_object() const {
    if (!object_.is_object())
      throw Error(path_ + ": expected an object, got " + type_name(object_) + " " +
                  short_dump(object_));
  }

  void reject_unknown() const {
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
      std::string msg = clip(join(it.key())) + ": unknown key";
      const std::string hint = closest_match(it.key(), known_);
      if (!hint.empty()) msg += " (did you mean \"" + join(hint) + "\"?)";
      throw Error(msg);
    }
  }

 private:
  std::string join(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  void refuse_foreign(const std::string& name) const {
    if (foreign_)
      throw Error(join(name) + ": a key of model.arch \"" + foreign_->first +
                  "\", but model.arch is \"" + foreign_->second + "\"");
  }

  template <class T>
  static T convert(const json& j, const std::string& path) {
    if constexpr (std::is_same_v<T, bool>) {
      if (!j.is_boolean()) throw wrong_type(path, "a boolean", j);
      return j.get<bool>();
    } else if constexpr (std::is_same_v<T, int64_t>) {
      if (j.is_number_integer()) {
        if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX))
          throw Error(path + ": integer out of range: " + j.dump());
        return j.get<int64_t>();
      }
      // 4096.0 is accepted as an integer; 4096.5 is not.
      if (j.is_number_float()) {
        const double d = j.get<double>();
        if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.0e15)
          return static_cast<int64_t>(d);
        throw Error(path + ": expected an integer, got " + j.dump());
      }
      throw wrong_type(path, "an integer", j);
    } else if constexpr (std::is_enum_v<T>) {
      return parse_choice<T>(convert<std::string>(j, path), path);
    } else if constexpr (std::is_same_v<T, Duration>) {
      if (j.is_number()) return Duration{convert<double>(j, path)};
      if (!j.is_string()) throw wrong_type(path, "seconds or a duration string like \"45m\"", j);
      try {
        return Duration{parse_duration(convert<std::string>(j, path))};
      } catch (const Error& e) {
        throw Error(path + ": " + e.what());
      }
    } else if constexpr (std::is_same_v<T, double>) {
      if (!j.is_number()) throw wrong_type(path, "a number", j);
      const double d = j.get<double>();
      if (!std::isfinite(d)) throw Error(path + ": expected a finite number");
      return d;
    } else {
      if (!j.is_string()) throw wrong_type(path, "a string", j);
      // JSON text holds only UTF-8; a --set value may not, and could not be written back.
      int64_t invalid = 0;
      sanitize_utf8(j.get_ref<const std::string&>(), &invalid);
      if (invalid > 0)
        throw Error(path + ": not valid UTF-8 (" + std::to_string(invalid) + " bad bytes)");
      return j.get<std::string>();
    }
  }

  static Error wrong_type(const std::string& path, const std::string& want, const json& got) {
    return Error(path + ": expected " + want + ", got " + type_name(got) + " " + short_dump(got));
  }

  const json& object_;
  std::string path_;
  std::vector<std::string> known_;
  std::optional<std::pair<std::string, std::string>> foreign_;  // (keys' arch, configured arch)
};

// Writes a struct back to JSON.
class Printer {
 public:
  explicit Printer(json& out) : out_(out) {}
  template <class S>
  void section(const std::string& name, S& s) {
    json sub = json::object();
    Printer p(sub);
    visit(s, p);
    out_[name] = std::move(sub);
  }
  template <class S>
  void list(const std::string& name, std::vector<S>& elements, const char*) {
    json out = json::array();
    for (auto& e : elements) {
      json sub = json::object();
      Printer p(sub);
      visit(e, p);
      out.push_back(std::move(sub));
    }
    out_[name] = std::move(out);
  }
  // Only the configured family's keys are written: the output parses back.
  template <class F>
  void for_arch(Arch arch, Arch active, F&& fields) {
    if (arch == active) fields();
  }
  template <class T>
  void operator()(const std::string& name, T& field, const char*, const Check<T>&) {
    out_[name] = to_json_value(field);
  }

 private:
  json& out_;
};

// Lists every key as a Markdown table row.
class Documenter {
 public:
  explicit Documenter(std::ostringstream& os) : os_(os) {}
  template <class S>
  void section(const std::string& name, S& s) {
    const std::string outer = prefix_;
    prefix_ += name + ".";
    visit(s, *this);
    prefix_ = outer;
  }
  template <class S>
  void list(const std::string& name, std::vector<S>&, const char* doc) {
    os_ << "| `" << prefix_ << name << "` | list | `[]` | " << doc << " |\n";
    const std::string outer = prefix_;
    prefix_ += name + "[].";
    S element;
    visit(element, *this);
    prefix_ = outer;
  }
  template <class F>
  void for_arch(Arch arch, Arch, F&& fields) {
    note_ = std::string("(") + name_of(arch) + " only) ";
    fields();
    note_.clear();
  }
  template <class T>
  void operator()(const std::string& name, T& field, const char* doc, const Check<T>&) {
    std::string type = std::is_same_v<T, bool>       ? "bool"
                       : std::is_same_v<T, int64_t>  ? "int"
                       : std::is_same_v<T, double>   ? "number"
                       : std::is_same_v<T, Duration> ? "duration"
                                                     : "string";
    std::string meaning = note_ + doc;  // a '|' would end the Markdown cell
    for (size_t pos = 0; (pos = meaning.find('|', pos)) != std::string::npos; pos += 2)
      meaning.replace(pos, 1, "\\|");
    os_ << "| `" << prefix_ << name << "` | " << type << " | `" << to_json_value(field).dump()
        << "` | " << meaning << " |\n";
  }

 private:
  std::ostringstream& os_;
  std::string prefix_;
  std::string note_;  // which model family the keys belong to
};

// Applies "a.b.c=value": the value is parsed as JSON when it can be, else taken as a string.
void apply_override(json& root, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--set " + clip(assignment) + ": expected key.path=value");
  const std::string key = trim(assignment.substr(0, eq));
  const std::string raw = assignment.substr(eq + 1);
  json value;
  try {
    value = parse_json(raw);
  } catch (const json::exception&) {
    value = raw;  // not JSON: a plain string
  } catch (const Error& e) {
    throw Error("--set " + clip(assignment) + ": " + e.what());
  }
  json* node = &root;
  const auto parts = split(key, '.');
  std::string path;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) throw Error("--set " + clip(assignment) + ": empty key in path");
    path += (path.empty() ? "" : ".") + parts[i];
    if (!node->is_object())
      throw Error("--set " + clip(assignment) + ": " + clip(path) + " is not inside an object");
    if (i + 1 == parts.size()) {
      (*node)[parts[i]] = value;
    } else {
      node = &(*node)[parts[i]];
      if (node->is_null()) *node = json::object();
    }
  }
}

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
  if (!c.data.train.empty() &&
      std::none_of(c.data.train.begin(), c.data.train.end(),
                   [](const CorpusConfig& k) { return k.weight > 0; }))
    throw Error("data.train: every weight is 0; at least one corpus must have a weight > 0");
  if (c.data.train.empty() && c.data.train_store.empty() &&
      (c.data.train_src.empty() || c.data.train_tgt.empty()))
    throw Error("data.train_src: give data.train_src and data.train_tgt, data.train or "
                "data.train_store");
  if (c.data.valid_src.empty() != c.data.valid_tgt.empty())
    throw Error("data.valid_tgt: give both valid_src and valid_tgt, or neither");
}

}  // namespace

template <class E>
const char* name_of(E value) {
  for (const auto& [v, name] : choices<E>())
    if (v == value) return name;
  return "?";
}

template <class E>
std::string choice_list() {
  std::string list;
  for (const auto& [v, name] : choices<E>()) list += (list.empty() ? "\"" : ", \"") + std::string(name) + "\"";
  return list;
}

template <class E>
E parse_choice(const std::string& text, const std::string& what) {
  for (const auto& [v, name] : choices<E>())
    if (text == name) return v;
  throw Error(what + ": must be one of " + choice_list<E>() + ", got \"" + clip(text) + "\"");
}

#define NMT_CHOICE(E)                                                   \
  template const char* name_of<E>(E);                                   \
  template std::string choice_list<E>();                                \
  template E parse_choice<E>(const std::string&, const std::string&);
NMT_CHOICE(Arch)
NMT_CHOICE(VocabType)
NMT_CHOICE(TieEmbeddings)
NMT_CHOICE(Positional)
NMT_CHOICE(Norm)
NMT_CHOICE(RnnCell)
NMT_CHOICE(RnnAttentionKind)
NMT_CHOICE(PrecisionSetting)
NMT_CHOICE(LrSchedule)
NMT_CHOICE(BestMetric)
#undef NMT_CHOICE

Config parse_config(const std::string& json_text, const std::vector<std::string>& overrides,
                    const std::string& origin) {
  json root;
  try {
    root = parse_json(json_text);
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  } catch (const json::parse_error& e) {
    // Turn the byte offset into line and column.
    size_t line = 1, col = 1;
    const size_t end = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, json_text.size());
    for (size_t i = 0; i < end; ++i) {
      if (json_text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    const size_t colon = what.find(": ", what.find("parse error"));
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw Error(origin + ":" + std::to_string(line) + ":" + std::to_string(col) +
                ": invalid JSON: " + clip(what, 200));
  } catch (const json::exception& e) {
    // Number overflow (1e400) and the like: the library's text after its "[json.exception...]".
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    throw Error(origin + ": invalid JSON: " + clip(what, 200));
  }
  if (!root.is_object()) throw Error(origin + ": the config must be a JSON object");
  for (const auto& o : overrides) apply_override(root, o);

  Config config;
  Parser parser(root, "");
  visit(config, parser);
  parser.reject_unknown();
  if (!config.data.train.empty()) {
    // data.train replaces the single pair; the defaults step aside, explicit values conflict.
    const auto data = root.find("data");
    for (const char* key : {"train_src", "train_tgt"}) {
      const auto it = data->find(key);
      if (it != data->end() && !it->get<std::string>().empty())
        throw Error(std::string("data.") + key +
                    ": give data.train or data.train_src/train_tgt, not both");
    }
    config.data.train_src.clear();
    config.data.train_tgt.clear();
  }
  validate_cross_fields(config);
  return config;
}

Config load_config_file(const std::string& path, const std::vector<std::string>& overrides) {
  if (!file_exists(path)) throw Error("config file not found: " + path);
  return parse_config(read_file(path), overrides, path);
}

void validate_data_files(const Config& c) {
  // Training files are only looked for here: preparing the store reads them once and refuses
  // aligned files whose line counts differ (counting them at every start would read the whole
  // corpus twice).
  if (c.data.train_store.empty()) {
    const auto corpora = training_corpora(c.data);
    for (size_t i = 0; i < corpora.size(); ++i) {
      const std::string key =
          c.data.train.empty() ? "data.train_" : "data.train[" + std::to_string(i) + "].";
      for (const auto& [side, path] : {std::pair<const char*, const std::string*>{"src", &corpora[i].src},
                                       {"tgt", &corpora[i].tgt}})
        if (!file_exists(*path)) throw Error(key + side + ": file not found: " + *path);
    }
  } else if (!file_exists(c.data.train_store + "/header.json")) {
    throw Error("data.train_store: not a token store (no header.json): " + c.data.train_store);
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

double parse_duration(const std::string& text) {
  const std::string t = trim(text);
  if (t.empty()) throw Error("expected a duration such as \"90s\", \"45m\" or \"2h\", got \"\"");
  double total = 0;
  size_t pos = 0;
  while (pos < t.size()) {
    size_t end = pos;
    while (end < t.size() && (std::isdigit(static_cast<unsigned char>(t[end])) || t[end] == '.'))
      ++end;
    const std::string number = t.substr(pos, end - pos);
    char* stop = nullptr;
    const double value = number.empty() ? -1 : std::strtod(number.c_str(), &stop);
    if (number.empty() || stop != number.c_str() + number.size() || !std::isfinite(value))
      throw Error("expected a duration such as \"90s\", \"45m\" or \"2h\", got \"" + clip(text) +
                  "\"");
    double unit = 1;
    if (end < t.size()) {
      const char u = t[end++];
      unit = u == 's' ? 1 : u == 'm' ? 60 : u == 'h' ? 3600 : u == 'd' ? 86400 : 0;
      if (unit == 0)
        throw Error("unknown unit '" + std::string(1, u) + "' in \"" + clip(text) +
                    "\" (s, m, h or d)");
    } else if (pos > 0) {
      throw Error("a number without a unit after the first part of \"" + clip(text) + "\"");
    }
    total += value * unit;
    pos = end;
  }
  return total;
}

std::string config_to_json(const Config& config) {
  json out = json::object();
  Printer p(out);
  visit(const_cast<Config&>(config), p);
  return out.dump(2);
}

bool same_model_config(const ModelConfig& a, const ModelConfig& b) {
  return config_to_json(Config{{}, {}, a, {}, {}}) == config_to_json(Config{{}, {}, b, {}, {}});
}

std::string config_reference_markdown() {
  std::ostringstream os;
  os << "| key | type | default | meaning |\n|---|---|---|---|\n";
  Config defaults;
  Documenter d(os);
  visit(defaults, d);
  return os.str();
}

bool is_device_name(const std::string& name) {
  if (name == "auto" || name == "cpu" || name == "cuda") return true;
  if (name.rfind("cuda:", 0) != 0 || name.size() == 5 || name.size() > 8) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

std::vector<CorpusConfig> training_corpora(const DataConfig& data) {
  if (!data.train.empty()) return data.train;
  return {CorpusConfig{data.train_src, data.train_tgt, 1.0}};
}

int effective_threads(const Config& config) {
  return config.train.threads > 0 ? static_cast<int>(config.train.threads) : hardware_threads();
}

}  // namespace nmt
