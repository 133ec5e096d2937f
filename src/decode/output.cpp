#include "decode/output.h"

#include <cstdio>
#include <ostream>

#include <nlohmann/json.hpp>

#include "plot/attention.h"
#include "util/io.h"
#include "util/util.h"

namespace nmt {

std::string format_score(double score) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", score);
  return buf;
}

namespace {

void write_attention(const std::string& dir, int64_t sentence, AttentionMap map) {
  char name[32];
  std::snprintf(name, sizeof name, "/%06lld", static_cast<long long>(sentence));
  map.sentence = sentence;
  write_file_atomic(dir + name + ".svg", attention_svg(map));
  write_file_atomic(dir + name + ".json", attention_json(map) + "\n");
}

// A soft alignment's JSON line: its object with the hypothesis (and its score, and the input's
// index in an n-best list). An empty line's object has no words.
std::string soft_line(const Translation& r, size_t j, int64_t index, const OutputOptions& o) {
  auto obj = soft_alignment_object(j < r.alignments.size() ? r.alignments[j] : WordAlignment{});
  obj["translation"] = r.texts[j];
  if (o.nbest || o.scores) obj["score"] = std::stod(format_score(r.scores[j]));
  if (o.nbest) obj["index"] = index;
  return obj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A document unit's hard alignment: "k:i-j" for word i of sentence k's source and word j of its
// translation.
std::string document_hard_alignment(const Translation& t) {
  std::string pairs;
  for (size_t k = 0; k < t.sentences.size(); ++k) {
    const auto& a = t.sentences[k].alignments;
    for (const auto& pair : split(a.empty() ? "" : hard_alignment_text(a[0]), ' '))
      if (!pair.empty()) pairs += (pairs.empty() ? "" : " ") + std::to_string(k) + ":" + pair;
  }
  return pairs;
}

// A document unit's line: its text, then its sentences' scores (space-separated) and hard
// alignments ("k:i-j", word i of sentence k's source and word j of its translation), or one
// JSON object with each sentence's soft alignment. A unit without sentences (a blank or
// whitespace-only line) is written as it is in hard and score output: blank lines stay blank.
void write_document_unit(std::ostream& out, const Translation& t, const OutputOptions& options,
                         AlignmentMode alignment) {
  if (t.sentences.empty() && alignment != AlignmentMode::kSoft) {
    out << t.texts[0] << '\n';
    return;
  }
  if (alignment == AlignmentMode::kSoft) {
    nlohmann::json sentences = nlohmann::json::array();
    for (const auto& s : t.sentences) {
      auto obj = soft_alignment_object(s.alignments.empty() ? WordAlignment{} : s.alignments[0]);
      obj["translation"] = s.texts[0];
      if (options.scores) obj["score"] = std::stod(format_score(s.scores[0]));
      sentences.push_back(std::move(obj));
    }
    const nlohmann::json unit = {{"translation", t.texts[0]}, {"sentences", sentences}};
    out << unit.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return;
  }
  std::string line = t.texts[0];
  if (alignment == AlignmentMode::kHard) line += " ||| " + document_hard_alignment(t);
  if (options.scores) {
    std::string scores;
    for (const auto& s : t.sentences)
      scores += (scores.empty() ? "" : " ") + format_score(s.scores[0]);
    line += '\t' + scores;
  }
  out << line << '\n';
}

}  // namespace

void write_translation(std::ostream& out, const Translation& t, int64_t index,
                       const OutputOptions& options, AlignmentMode alignment) {
  if (options.document) {
    write_document_unit(out, t, options, alignment);
    return;
  }
  for (size_t j = 0; j < (options.nbest ? t.texts.size() : 1); ++j) {
    if (alignment == AlignmentMode::kSoft) {
      out << soft_line(t, j, index, options) << '\n';
      continue;
    }
    // A hard alignment follows the hypothesis, as Marian writes it.
    const std::string text =
        alignment == AlignmentMode::kHard
            ? t.texts[j] + " ||| " +
                  (j < t.alignments.size() ? hard_alignment_text(t.alignments[j]) : "")
            : t.texts[j];
    if (options.nbest)
      out << index << " ||| " << text << " ||| " << format_score(t.scores[j]) << '\n';
    else if (options.scores)
      out << text << '\t' << format_score(t.scores[j]) << '\n';
    else
      out << text << '\n';
  }
  if (t.attention) write_attention(options.attention_dir, index + 1, *t.attention);
}

nlohmann::json result_json(const Translation& t, const OutputOptions& options,
                           AlignmentMode alignment) {
  nlohmann::json r = {{"translation", t.texts[0]}};
  const auto score = [](const Translation& x) { return std::stod(format_score(x.scores[0])); };
  const auto soft = [](const Translation& x) {
    return soft_alignment_object(x.alignments.empty() ? WordAlignment{} : x.alignments[0]);
  };
  if (!options.document) {
    if (options.scores) r["score"] = score(t);
    if (alignment == AlignmentMode::kHard)
      r["alignment"] = t.alignments.empty() ? "" : hard_alignment_text(t.alignments[0]);
    if (alignment == AlignmentMode::kSoft) r["alignment"] = soft(t);
    return r;
  }
  nlohmann::json scores = nlohmann::json::array(), softs = nlohmann::json::array();
  for (const auto& s : t.sentences) {
    scores.push_back(score(s));
    softs.push_back(soft(s));
  }
  if (options.scores) r["score"] = scores;
  if (alignment == AlignmentMode::kHard) r["alignment"] = document_hard_alignment(t);
  if (alignment == AlignmentMode::kSoft) r["alignment"] = softs;
  return r;
}

}  // namespace nmt
