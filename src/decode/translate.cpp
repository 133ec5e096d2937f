#include "decode/translate.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <ostream>

#include <spdlog/spdlog.h>

#include "data/tensors.h"
#include "decode/batches.h"
#include "decode/cross_attention.h"
#include "decode/encode.h"
#include "decode/output.h"
#include "decode/terms.h"
#include "text/spm.h"
#include "util/line_reader.h"
#include "util/util.h"

namespace nmt {

TranslateStats& TranslateStats::operator+=(const TranslateStats& other) {
  lines += other.lines;
  truncated += other.truncated;
  replaced_bytes += other.replaced_bytes;
  output_tokens += other.output_tokens;
  return *this;
}

namespace {

// Keeps one output line per input line, whatever the vocabulary's pieces hold.
std::string one_line(std::string text) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return text;
}

std::shared_ptr<const PieceTexts> target_piece_texts(const Vocabs& vocabs) {
  std::vector<std::string> all;
  for (int id = 0; id < vocabs.tgt.size(); ++id) all.push_back(vocabs.tgt.piece(id));
  return std::make_shared<const PieceTexts>(piece_texts(all));
}

}  // namespace

TranslateOptions translate_options(const DecodeConfig& decode, int64_t beam_size) {
  TranslateOptions o;
  o.batch_tokens = decode.batch_tokens;
  o.search.beam_size = beam_size > 0 ? beam_size : decode.beam_size;
  o.search.length_penalty = decode.length_penalty;
  o.search.nbest = std::min(decode.nbest, o.search.beam_size);
  o.search.max_len_a = decode.max_len_a;
  o.search.max_len_b = decode.max_len_b;
  o.search.mode = resolve_search_mode(o.search, false);
  return o;
}

TranslateOptions translate_options(const Config& config, int64_t beam_size) {
  return translate_options(config.decode, beam_size);
}

namespace {

void check_attention_options(Scorer& scorer, const TranslateOptions& options) {
  if (options.attention_layer >= scorer.attention_layers())
    throw Error("attention layer " + std::to_string(options.attention_layer) +
                " is out of range: the model has " + std::to_string(scorer.attention_layers()) +
                " decoder layers (0-based)");
  for (Scorer* s : {&scorer, options.reverse_scorer})
    if (s && options.alignment_layer >= s->attention_layers())
      throw Error("alignment layer " + std::to_string(options.alignment_layer) +
                  " is out of range: " + (s == &scorer ? "the" : "the reverse") + " model has " +
                  std::to_string(s->attention_layers()) + " decoder layers (0-based)");
  if (options.attention_head >= scorer.attention_heads())
    throw Error("attention head " + std::to_string(options.attention_head) +
                " is out of range: the model has " + std::to_string(scorer.attention_heads()) +
                " heads (0-based)");
}

// Each line's source ids with EOS, after tag_id when it is >= 0 (cut to the model's limit),
// and the lines to translate (not empty), shortest first.
std::vector<size_t> encode_lines(Scorer& scorer, const Vocabs& vocabs,
                                 const std::vector<std::string>& lines, int64_t tag_id,
                                 std::vector<std::vector<int64_t>>& ids, TranslateStats& s) {
  const int64_t max_src = scorer.max_positions() - 1;  // room for EOS
  ids.assign(lines.size(), {});
  std::vector<size_t> todo;
  LineFixes fixes;
  for (size_t i = 0; i < lines.size(); ++i) {
    ids[i] = encode_line(vocabs.src, lines[i], max_src, fixes, tag_id);
    if (ids[i].empty()) continue;
    ids[i].push_back(kEosId);
    todo.push_back(i);
  }
  s.truncated += fixes.truncated;
  s.replaced_bytes += fixes.replaced_bytes;
  std::stable_sort(todo.begin(), todo.end(),
                   [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  return todo;
}

// Each line's phrases as target ids (an empty vector when no line has any). A phrase to include
// that does not fit the line's output length limit, after the ones before it, is dropped with a
// warning naming the line (1-based, in the whole input).
std::vector<SentenceTerms> encode_terms(Scorer& scorer, const Vocabs& vocabs,
                                        const std::vector<std::vector<int64_t>>& ids,
                                        const LineTerms& terms, const TranslateOptions& options,
                                        int64_t first_line, const PieceTexts* pieces) {
  if (terms.constraints.empty() && terms.avoid.empty()) return {};
  const auto encode = [&](const std::string& phrase) {
    std::vector<int64_t> pieces;
    for (const int id : vocabs.tgt.encode(phrase)) pieces.push_back(id);
    return pieces;
  };
  std::vector<SentenceTerms> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i].empty()) continue;  // an empty line is not translated
    out[i].pieces = pieces;
    if (i < terms.avoid.size())
      for (const auto& text : terms.avoid[i]) {
        auto encoded = encode(text);
        if (encoded.empty()) continue;
        out[i].avoid.push_back(std::move(encoded));
        out[i].avoid_text.push_back(text);
      }
    if (i >= terms.constraints.size()) continue;
    const int64_t limit = max_output_length(static_cast<int64_t>(ids[i].size()) - 1, options.search,
                                            scorer.max_positions() - 1);
    int64_t used = 0;
    for (const auto& text : terms.constraints[i]) {
      auto encoded = encode(text);
      const auto n = static_cast<int64_t>(encoded.size());
      if (n == 0) continue;
      if (used + n > limit) {
        spdlog::warn(
            "line {}: constraint \"{}\" ({} pieces) does not fit the output length "
            "limit of {} pieces with the constraints before it; dropped",
            first_line + static_cast<int64_t>(i) + 1, text, n, limit);
        continue;
      }
      used += n;
      out[i].constraints.push_back(std::move(encoded));
    }
  }
  return out;
}

// The results of one batch, written into `out`; returns the best hypotheses' output tokens.
int64_t translate_batch(Scorer& scorer, const Vocabs& vocabs,
                        const std::vector<std::vector<int64_t>>& ids,
                        const std::vector<size_t>& todo, std::pair<size_t, size_t> batch,
                        const TranslateOptions& options, int64_t first_line,
                        const std::vector<std::string>& lines,
                        const std::vector<SentenceTerms>& terms, std::vector<Translation>& out) {
  // Autocast state is per thread.
  const AutocastGuard autocast(scorer.device(), options.precision);
  const auto nbest = static_cast<size_t>(options.search.nbest);
  const auto [start, end] = batch;
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> line_numbers;
  std::vector<SentenceTerms> batch_terms;
  std::vector<std::string> batch_lines;
  for (size_t k = start; k < end; ++k) {
    rows.push_back(ids[todo[k]]);
    line_numbers.push_back(first_line + static_cast<int64_t>(todo[k]));
    if (!terms.empty()) batch_terms.push_back(terms[todo[k]]);
    if (options.alignment != AlignmentMode::kNone) batch_lines.push_back(lines[todo[k]]);
  }
  const auto src = pad_sequences(rows, kPadId);
  const auto hyps = search(scorer, src, options.search, line_numbers, batch_terms);
  std::vector<const Hypothesis*> best;
  std::vector<Translation*> results;
  static const Hypothesis kNone;
  int64_t output_tokens = 0;
  for (size_t k = start; k < end; ++k) {
    const auto& nb = hyps[k - start];
    auto& t = out[todo[k]];
    for (size_t j = 0; j < nbest; ++j) {
      // Searches return nbest hypotheses; repeat the last if a tiny vocabulary gave fewer.
      if (nb.empty()) break;
      const auto& h = nb[std::min(j, nb.size() - 1)];
      t.texts[j] = one_line(vocabs.tgt.decode(h.tokens));
      t.scores[j] = h.score;
    }
    const Hypothesis* top = nb.empty() ? &kNone : &nb.front();
    output_tokens += static_cast<int64_t>(top->tokens.size()) + (top->ended ? 1 : 0);
    best.push_back(top);
    results.push_back(&t);
  }
  if (options.attention) attach_attention(scorer, vocabs, rows, best, options, results);
  if (options.alignment != AlignmentMode::kNone)
    attach_alignments(scorer, vocabs, rows, batch_lines, hyps, options, results);
  for (auto* t : results) t->done = true;
  return output_tokens;
}

}  // namespace

std::vector<Translation> translate_lines(Scorer& scorer, const Vocabs& vocabs,
                                         const std::vector<std::string>& lines,
                                         const TranslateOptions& options, TranslateStats* stats,
                                         const LineTerms& terms, const JobHooks& hooks,
                                         int64_t first_line) {
  check_attention_options(scorer, options);
  const auto nbest = static_cast<size_t>(options.search.nbest);
  TranslateStats s;
  s.lines = static_cast<int64_t>(lines.size());
  std::vector<std::vector<int64_t>> ids;
  const std::vector<size_t> todo = encode_lines(scorer, vocabs, lines, options.tag_id, ids, s);
  auto pieces = terms.pieces;
  if (!pieces && (!terms.constraints.empty() || !terms.avoid.empty()))
    pieces = target_piece_texts(vocabs);
  const auto sentence_terms =
      encode_terms(scorer, vocabs, ids, terms, options, first_line, pieces.get());
  // Beams (or samples) multiply the rows a batch decodes, so the budget covers all of them.
  std::vector<int64_t> widths;
  for (const size_t i : todo) widths.push_back(static_cast<int64_t>(ids[i].size()));
  const auto batches = plan_batches(
      widths, std::max<int64_t>(1, options.batch_tokens / rows_per_sentence(options.search)));

  std::vector<Translation> out(lines.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].texts.assign(nbest, "");
    out[i].scores.assign(nbest, 0.0);
    out[i].done = ids[i].empty();  // an empty line's empty output
  }
  std::mutex report_mutex;
  auto report = [&](int64_t n) {
    if (!hooks.on_lines || n == 0) return;
    const std::lock_guard<std::mutex> lock(report_mutex);
    hooks.on_lines(n);
  };
  report(static_cast<int64_t>(lines.size() - todo.size()));
  std::vector<int64_t> output_tokens(batches.size(), 0);
  auto run_batch = [&](size_t b) {
    if (hooks.stop_requested && hooks.stop_requested()) return;
    output_tokens[b] = translate_batch(scorer, vocabs, ids, todo, batches[b], options, first_line,
                                       lines, sentence_terms, out);
    report(static_cast<int64_t>(batches[b].second - batches[b].first));
  };
  const bool side_by_side = static_cast<int64_t>(batches.size()) >=
                            options.min_batches_per_worker * options.batch_workers;
  run_side_by_side(batches.size(), side_by_side ? options.batch_workers : 1, run_batch);
  for (const int64_t n : output_tokens) s.output_tokens += n;
  if (stats != nullptr) *stats = s;
  return out;
}

std::vector<std::string> translate_best(Scorer& scorer, const Vocabs& vocabs,
                                        const std::vector<std::string>& lines,
                                        const TranslateOptions& options, TranslateStats* stats,
                                        const LineTerms& terms) {
  std::vector<std::string> out;
  out.reserve(lines.size());
  for (auto& t : translate_lines(scorer, vocabs, lines, options, stats, terms))
    out.push_back(std::move(t.texts[0]));
  return out;
}

TranslateStats translate_stream(Scorer& scorer, const Vocabs& vocabs, LineReader& in,
                                std::ostream& out, const TranslateOptions& options,
                                const StreamOptions& stream, const OutputOptions& output) {
  if (stream.chunk_lines < 1) throw Error("chunk_lines must be >= 1");
  if (stream.skip_lines < 0) throw Error("skip_lines must be >= 0");
  const auto& stop_requested = stream.hooks.stop_requested;
  const auto stop = [&] { return stop_requested && stop_requested(); };
  const auto next = [&](std::string& unit) {
    return stream.format.read ? stream.format.read(in, unit) : in.next(unit);
  };
  TranslateStats total;
  std::vector<std::string> chunk;
  std::string line;
  int64_t first_line = 0;  // 0-based number of the chunk's first line
  while (first_line < stream.skip_lines && next(line)) ++first_line;
  if (first_line < stream.skip_lines)
    throw Error(in.path() + " has " + std::to_string(first_line) + " lines, fewer than the " +
                std::to_string(stream.skip_lines) + " already translated");
  TermFiles term_files(options.constraints_file, options.avoid_file);
  term_files.skip(stream.skip_lines);
  const auto pieces = term_files.active() ? target_piece_texts(vocabs) : nullptr;
  bool stopped = false;
  auto flush_chunk = [&] {
    TranslateStats s;
    LineTerms terms;
    terms.pieces = pieces;
    if (term_files.active())
      term_files.read(static_cast<int64_t>(chunk.size()), terms.constraints, terms.avoid);
    const auto results =
        stream.format.translate
            ? stream.format.translate(chunk, terms, stream.hooks, first_line, &s)
            : translate_lines(scorer, vocabs, chunk, options, &s, terms, stream.hooks, first_line);
    size_t written = 0;
    for (; written < results.size() && results[written].done; ++written)
      write_translation(out, results[written], first_line + static_cast<int64_t>(written), output,
                        options.alignment);
    out.flush();
    if (!out) throw Error("cannot write output");
    stopped = written < results.size();
    s.lines = static_cast<int64_t>(written);
    total += s;
    first_line += static_cast<int64_t>(chunk.size());
    chunk.clear();
  };
  while (!stopped && !stop() && next(line)) {
    chunk.push_back(std::move(line));
    if (static_cast<int64_t>(chunk.size()) >= stream.chunk_lines) flush_chunk();
  }
  if (!chunk.empty() && !stopped) flush_chunk();
  if (!stopped && !stop()) term_files.finish();
  return total;
}

}  // namespace nmt
