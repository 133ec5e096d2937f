#include "decode/translate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <ostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "data/tensors.h"
#include "decode/lines.h"
#include "decode/terms.h"
#include "text/spm.h"
#include "util/io.h"
#include "util/line_reader.h"
#include "util/util.h"

namespace nmt {

namespace {

// Keeps one output line per input line, whatever the vocabulary's pieces hold.
std::string one_line(std::string text) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return text;
}

// One decoder layer's cross-attention (mean over heads, or head `head` when >= 0) while the
// decoder is fed each row's target prefix, in one batched pass: [rows, T, S] on the CPU, the
// weights the search saw.
torch::Tensor forced_attention(Scorer& scorer, const std::vector<std::vector<int64_t>>& src_rows,
                               const std::vector<std::vector<int64_t>>& tgt_in, int64_t layer,
                               int64_t head) {
  const torch::Device device = scorer.device();
  const auto all = scorer.attention(pad_sequences(src_rows, kPadId).to(device),
                                    pad_sequences(tgt_in, kPadId).to(device));
  const auto& w = all[static_cast<size_t>(layer)];  // [rows, heads, T, S]
  return (head < 0 ? w.mean(1) : w.select(1, head)).to(torch::kCPU, torch::kFloat).contiguous();
}

// BOS and the tokens that feed the decoder until it has predicted the last of `tokens`, and
// EOS when `with_eos`.
std::vector<int64_t> decoder_input(const std::vector<int>& tokens, bool with_eos) {
  std::vector<int64_t> row{kBosId};
  row.insert(row.end(), tokens.begin(), tokens.end());
  if (!with_eos && !tokens.empty()) row.pop_back();
  return row;
}

// Cross-attention of each row's best hypothesis (--attention-out).
void attach_attention(Scorer& scorer, const Vocabs& vocabs,
                      const std::vector<std::vector<int64_t>>& src_rows,
                      const std::vector<const Hypothesis*>& best, const TranslateOptions& o,
                      std::vector<Translation*>& results) {
  torch::InferenceMode guard;
  const int64_t layer = o.attention_layer < 0 ? scorer.attention_layers() - 1 : o.attention_layer;
  std::vector<std::vector<int64_t>> tgt_in;
  for (const auto* h : best) tgt_in.push_back(decoder_input(h->tokens, h->ended));
  const auto w = forced_attention(scorer, src_rows, tgt_in, layer, o.attention_head);
  const auto acc = w.accessor<float, 3>();
  for (size_t i = 0; i < best.size(); ++i) {
    AttentionMap map;
    map.layer = layer;
    map.head = o.attention_head;
    map.num_heads = scorer.attention_heads();
    for (const auto id : src_rows[i]) map.source.push_back(vocabs.src.piece(static_cast<int>(id)));
    for (const int id : best[i]->tokens) map.target.push_back(vocabs.tgt.piece(id));
    if (best[i]->ended) map.target.push_back(vocabs.tgt.piece(kEosId));
    for (size_t t = 0; t < map.target.size(); ++t) {
      std::vector<float> row;
      for (size_t s = 0; s < map.source.size(); ++s)
        row.push_back(
            acc[static_cast<int64_t>(i)][static_cast<int64_t>(t)][static_cast<int64_t>(s)]);
      map.weights.push_back(std::move(row));
    }
    results[i]->attention = std::move(map);
  }
}

// The columns of a source row that hold the line's pieces: not the tag, EOS or padding.
std::pair<size_t, size_t> piece_columns(const std::vector<int64_t>& src_row, int64_t prefix_id) {
  const size_t begin = prefix_id >= 0 ? 1 : 0;
  return {begin, src_row.size() - 1};  // the row ends with EOS
}

// One hypothesis' word alignment from its piece attention [T][S columns].
WordAlignment word_alignment_of(const std::vector<std::vector<float>>& attention,
                                const std::vector<std::string>& source_pieces,
                                const std::vector<std::string>& target_pieces,
                                const std::string& source_line, const std::string& hypothesis) {
  WordAlignment a{words_of(source_line), words_of(hypothesis), {}};
  const auto S = static_cast<int64_t>(a.source.size()), T = static_cast<int64_t>(a.target.size());
  if (S > 0 && T > 0)
    a.weights = word_alignment(attention, piece_words(target_pieces, T), T,
                               piece_words(source_pieces, S), S);
  return a;
}

// Every hypothesis' word alignment, from one teacher-forced pass over all of them: the layer's
// cross-attention, mean over heads, at the step that predicted each piece.
void attach_alignments(Scorer& scorer, const Vocabs& vocabs,
                       const std::vector<std::vector<int64_t>>& src_rows,
                       const std::vector<std::string>& source_lines,
                       const std::vector<std::vector<Hypothesis>>& hyps,
                       const TranslateOptions& o, std::vector<Translation*>& results) {
  torch::InferenceMode guard;
  const int64_t layers = scorer.attention_layers();
  const int64_t layer = o.alignment_layer >= 0 ? o.alignment_layer : std::max<int64_t>(layers - 2, 0);
  std::vector<std::vector<int64_t>> src, tgt_in;
  std::vector<std::pair<size_t, size_t>> which;  // (sentence, hypothesis) of each row
  for (size_t i = 0; i < hyps.size(); ++i)
    for (size_t j = 0; j < hyps[i].size(); ++j) {
      if (hyps[i][j].tokens.empty()) continue;
      src.push_back(src_rows[i]);
      tgt_in.push_back(decoder_input(hyps[i][j].tokens, false));
      which.emplace_back(i, j);
    }
  for (size_t i = 0; i < hyps.size(); ++i) results[i]->alignments.assign(results[i]->texts.size(), {});
  if (which.empty()) return;
  const auto w = forced_attention(scorer, src, tgt_in, layer, -1);
  const auto acc = w.accessor<float, 3>();  // [rows, T, S]
  for (size_t r = 0; r < which.size(); ++r) {
    const auto [i, j] = which[r];
    const auto [c0, c1] = piece_columns(src_rows[i], o.source_prefix_id);
    std::vector<std::string> source_pieces, target_pieces;
    for (size_t c = c0; c < c1; ++c) source_pieces.push_back(vocabs.src.piece(static_cast<int>(src_rows[i][c])));
    for (const int id : hyps[i][j].tokens) target_pieces.push_back(vocabs.tgt.piece(id));
    std::vector<std::vector<float>> attention;
    for (size_t t = 0; t < target_pieces.size(); ++t) {
      attention.emplace_back();
      for (size_t c = c0; c < c1; ++c)
        attention.back().push_back(acc[static_cast<int64_t>(r)][static_cast<int64_t>(t)][static_cast<int64_t>(c)]);
    }
    results[i]->alignments[j] = word_alignment_of(attention, source_pieces, target_pieces,
                                                  source_lines[i], results[i]->texts[j]);
  }
  // As the texts: a search that gave fewer hypotheses than nbest repeats its last.
  for (size_t i = 0; i < hyps.size(); ++i)
    for (size_t j = hyps[i].size(); j < results[i]->alignments.size() && j > 0; ++j)
      results[i]->alignments[j] = results[i]->alignments[j - 1];
}

std::shared_ptr<const PieceTexts> target_piece_texts(const Vocabs& vocabs) {
  std::vector<std::string> all;
  for (int id = 0; id < vocabs.tgt.size(); ++id) all.push_back(vocabs.tgt.piece(id));
  return std::make_shared<const PieceTexts>(piece_texts(all));
}

std::string format_score(double score) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", score);
  return buf;
}

void write_attention(const std::string& dir, int64_t sentence, AttentionMap map) {
  char name[32];
  std::snprintf(name, sizeof name, "/%06lld", static_cast<long long>(sentence));
  map.sentence = sentence;
  write_file_atomic(dir + name + ".svg", attention_svg(map));
  write_file_atomic(dir + name + ".json", attention_json(map) + "\n");
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
  if (options.alignment_layer >= scorer.attention_layers())
    throw Error("alignment layer " + std::to_string(options.alignment_layer) +
                " is out of range: the model has " + std::to_string(scorer.attention_layers()) +
                " decoder layers (0-based)");
  if (options.attention_head >= scorer.attention_heads())
    throw Error("attention head " + std::to_string(options.attention_head) +
                " is out of range: the model has " + std::to_string(scorer.attention_heads()) +
                " heads (0-based)");
}

// Each line's source ids with EOS, after prefix_id when it is >= 0 (cut to the model's limit),
// and the lines to translate (not empty), shortest first.
std::vector<size_t> encode_lines(Scorer& scorer, const Vocabs& vocabs,
                                 const std::vector<std::string>& lines, int64_t prefix_id,
                                 std::vector<std::vector<int64_t>>& ids, TranslateStats& s) {
  const int64_t max_src = scorer.max_positions() - 1;  // room for EOS
  ids.assign(lines.size(), {});
  std::vector<size_t> todo;
  LineFixes fixes;
  for (size_t i = 0; i < lines.size(); ++i) {
    ids[i] = encode_line(vocabs.src, lines[i], max_src, fixes, prefix_id);
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
  if (terms.include.empty() && terms.avoid.empty()) return {};
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
    if (i >= terms.include.size()) continue;
    const int64_t limit = max_output_length(static_cast<int64_t>(ids[i].size()) - 1,
                                            options.search, scorer.max_positions() - 1);
    int64_t used = 0;
    for (const auto& text : terms.include[i]) {
      auto encoded = encode(text);
      const auto n = static_cast<int64_t>(encoded.size());
      if (n == 0) continue;
      if (used + n > limit) {
        spdlog::warn("line {}: constraint \"{}\" ({} pieces) does not fit the output length "
                     "limit of {} pieces with the constraints before it; dropped",
                     first_line + static_cast<int64_t>(i) + 1, text, n, limit);
        continue;
      }
      used += n;
      out[i].include.push_back(std::move(encoded));
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
                                         const JobControl& job, const LineTerms& terms) {
  check_attention_options(scorer, options);
  const auto nbest = static_cast<size_t>(options.search.nbest);
  TranslateStats s;
  s.lines = static_cast<int64_t>(lines.size());
  std::vector<std::vector<int64_t>> ids;
  const std::vector<size_t> todo =
      encode_lines(scorer, vocabs, lines, options.source_prefix_id, ids, s);
  auto pieces = terms.pieces;
  if (!pieces && (!terms.include.empty() || !terms.avoid.empty()))
    pieces = target_piece_texts(vocabs);
  const auto sentence_terms =
      encode_terms(scorer, vocabs, ids, terms, options, job.first_line, pieces.get());
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
    if (!job.on_lines || n == 0) return;
    const std::lock_guard<std::mutex> lock(report_mutex);
    job.on_lines(n);
  };
  report(static_cast<int64_t>(lines.size() - todo.size()));
  std::vector<int64_t> output_tokens(batches.size(), 0);
  auto run_batch = [&](size_t b) {
    if (job.stop_requested && job.stop_requested()) return;
    output_tokens[b] = translate_batch(scorer, vocabs, ids, todo, batches[b], options,
                                       job.first_line, lines, sentence_terms, out);
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
  for (auto& t : translate_lines(scorer, vocabs, lines, options, stats, {}, terms))
    out.push_back(std::move(t.texts[0]));
  return out;
}

namespace {

// A soft alignment's JSON line: its object with the hypothesis (and its score, and the input's
// index in an n-best list). An empty line's object has no words.
std::string soft_line(const Translation& r, size_t j, int64_t index, const StreamOptions& stream) {
  auto obj = soft_alignment_object(j < r.alignments.size() ? r.alignments[j] : WordAlignment{});
  obj["translation"] = r.texts[j];
  if (stream.nbest || stream.scores) obj["score"] = std::stod(format_score(r.scores[j]));
  if (stream.nbest) obj["index"] = index;
  return obj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void write_result(std::ostream& out, const Translation& r, int64_t index,
                  const StreamOptions& stream, AlignmentMode alignment) {
  for (size_t j = 0; j < (stream.nbest ? r.texts.size() : 1); ++j) {
    if (alignment == AlignmentMode::kSoft) {
      out << soft_line(r, j, index, stream) << '\n';
      continue;
    }
    // A hard alignment follows the hypothesis, as Marian writes it.
    const std::string text =
        alignment == AlignmentMode::kHard
            ? r.texts[j] + " ||| " +
                  (j < r.alignments.size() ? hard_alignment_text(r.alignments[j]) : "")
            : r.texts[j];
    if (stream.nbest)
      out << index << " ||| " << text << " ||| " << format_score(r.scores[j]) << '\n';
    else if (stream.scores)
      out << text << '\t' << format_score(r.scores[j]) << '\n';
    else
      out << text << '\n';
  }
  if (r.attention) write_attention(stream.attention_dir, index + 1, *r.attention);
}

}  // namespace

TranslateStats translate_stream(Scorer& scorer, const Vocabs& vocabs, LineReader& in,
                                std::ostream& out, const TranslateOptions& options,
                                const StreamOptions& stream) {
  if (stream.chunk_lines < 1) throw Error("chunk_lines must be >= 1");
  if (stream.skip_lines < 0) throw Error("skip_lines must be >= 0");
  const auto stop = [&] { return stream.stop_requested && stream.stop_requested(); };
  TranslateStats total;
  std::vector<std::string> chunk;
  std::string line;
  int64_t first_line = 0;  // 0-based number of the chunk's first line
  while (first_line < stream.skip_lines && in.next(line)) ++first_line;
  if (first_line < stream.skip_lines)
    throw Error(in.path() + " has " + std::to_string(first_line) + " lines, fewer than the " +
                std::to_string(stream.skip_lines) + " already translated");
  TermFiles term_files(options.constraints_file, options.avoid_file);
  term_files.skip(stream.skip_lines);
  const auto pieces = term_files.active() ? target_piece_texts(vocabs) : nullptr;
  JobControl job;
  job.on_lines = stream.on_lines;
  job.stop_requested = stream.stop_requested;
  bool stopped = false;
  auto flush_chunk = [&] {
    TranslateStats s;
    job.first_line = first_line;
    LineTerms terms;
    terms.pieces = pieces;
    if (term_files.active())
      term_files.read(static_cast<int64_t>(chunk.size()), terms.include, terms.avoid);
    const auto results = translate_lines(scorer, vocabs, chunk, options, &s, job, terms);
    size_t written = 0;
    for (; written < results.size() && results[written].done; ++written)
      write_result(out, results[written], first_line + static_cast<int64_t>(written), stream,
                   options.alignment);
    out.flush();
    if (!out) throw Error("cannot write output");
    stopped = written < results.size();
    total.lines += static_cast<int64_t>(written);
    total.truncated += s.truncated;
    total.replaced_bytes += s.replaced_bytes;
    total.output_tokens += s.output_tokens;
    first_line += static_cast<int64_t>(chunk.size());
    chunk.clear();
  };
  while (!stopped && !stop() && in.next(line)) {
    chunk.push_back(std::move(line));
    if (static_cast<int64_t>(chunk.size()) >= stream.chunk_lines) flush_chunk();
  }
  if (!chunk.empty() && !stopped) flush_chunk();
  if (!stopped && !stop()) term_files.finish();
  return total;
}

}  // namespace nmt
