#include "decode/output.h"

#include <cstdio>
#include <ostream>

#include <nlohmann/json.hpp>

#include "plot/attention.h"
#include "util/io.h"

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

}  // namespace

void write_translation(std::ostream& out, const Translation& t, int64_t index,
                       const OutputOptions& options, AlignmentMode alignment) {
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

}  // namespace nmt
