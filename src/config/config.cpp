#include "config/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "config/schema.h"
#include "util/util.h"

namespace nmt {

namespace {

// The JSON spellings of each choice, listed once.
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

template <>
const Choices<Parallel>& choices() {
  static const Choices<Parallel> c = {
      {Parallel::kAuto, "auto"}, {Parallel::kBatches, "batches"}, {Parallel::kOps, "ops"}};
  return c;
}
template <>
const Choices<AlignmentMode>& choices() {
  static const Choices<AlignmentMode> c = {{AlignmentMode::kHard, "hard"},
                                           {AlignmentMode::kSoft, "soft"}};
  return c;
}
template <>
const Choices<AlignmentStep>& choices() {
  static const Choices<AlignmentStep> c = {{AlignmentStep::kPredict, "predict"},
                                           {AlignmentStep::kConsume, "consume"}};
  return c;
}
template <>
const Choices<Quantize>& choices() {
  static const Choices<Quantize> c = {{Quantize::kInt8, "int8"}};
  return c;
}
template <>
const Choices<Ct2Quantization>& choices() {
  static const Choices<Ct2Quantization> c = {{Ct2Quantization::kFloat32, "float32"},
                                             {Ct2Quantization::kInt8, "int8"},
                                             {Ct2Quantization::kInt16, "int16"},
                                             {Ct2Quantization::kFloat16, "float16"}};
  return c;
}
template <>
const Choices<InputFormat>& choices() {
  static const Choices<InputFormat> c = {
      {InputFormat::kLines, "lines"}, {InputFormat::kText, "text"}, {InputFormat::kHtml, "html"}};
  return c;
}
template <>
const Choices<ExportFormat>& choices() {
  static const Choices<ExportFormat> c = {{ExportFormat::kCTranslate2, "ctranslate2"}};
  return c;
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
NMT_CHOICE(Parallel)
NMT_CHOICE(AlignmentMode)
NMT_CHOICE(AlignmentStep)
NMT_CHOICE(Quantize)
NMT_CHOICE(Ct2Quantization)
NMT_CHOICE(ExportFormat)
NMT_CHOICE(InputFormat)
#undef NMT_CHOICE

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

std::vector<std::string> TrainingData::tags() const {
  std::vector<std::string> out;
  for (const auto& k : corpora)
    if (!k.tag.empty()) out.push_back(k.tag);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool is_device_name(const std::string& name) {
  if (name == "auto" || name == "cpu" || name == "cuda") return true;
  if (name.rfind("cuda:", 0) != 0 || name.size() == 5 || name.size() > 8) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

int effective_threads(const Config& config) {
  return config.train.threads > 0 ? static_cast<int>(config.train.threads) : hardware_threads();
}

}  // namespace nmt
