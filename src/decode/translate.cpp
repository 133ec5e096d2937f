#include "decode/translate.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <ostream>

#include "data/tensors.h"
#include "decode/lines.h"
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

// Cross-attention of each row's best hypothesis, by teacher forcing it through the decoder:
// the same weights the search saw, in one batched pass.
void attach_attention(Scorer& scorer, const Vocabs& vocabs, const torch::Tensor& src,
                      const std::vector<std::vector<int64_t>>& src_rows,
                      const std::vector<const Hypothesis*>& best, const TranslateOptions& o,
                      std::vector<Translation*>& results) {
  torch::InferenceMode guard;
  const auto layers = scorer.attention_layers();
  const int64_t layer = o.attention_layer < 0 ? layers - 1 : o.attention_layer;
  std::vector<std::vector<int64_t>> tgt_in;
  for (const auto* h : best) {
    std::vector<int64_t> row{kBosId};
    row.insert(row.end(), h->tokens.begin(), h->tokens.end());
    if (!h->ended && !h->tokens.empty()) row.pop_back();  // no EOS row to predict
    tgt_in.push_back(std::move(row));
  }
  const torch::Device device = scorer.device();
  const auto weights =
      scorer.attention(src.to(device), pad_sequences(tgt_in, kPadId).to(device));
  auto w = weights[static_cast<size_t>(layer)];  // [B, heads, T, S]
  w = o.attention_head < 0 ? w.mean(1) : w.select(1, o.attention_head);
  w = w.to(torch::kCPU, torch::kFloat).contiguous();
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

// The results of one batch, written into `out`; returns the best hypotheses' output tokens.
int64_t translate_batch(Scorer& scorer, const Vocabs& vocabs,
                        const std::vector<std::vector<int64_t>>& ids,
                        const std::vector<size_t>& todo, std::pair<size_t, size_t> batch,
                        const TranslateOptions& options, int64_t first_line,
                        std::vector<Translation>& out) {
  // Autocast state is per thread.
  const AutocastGuard autocast(scorer.device(), options.precision);
  const auto nbest = static_cast<size_t>(options.search.nbest);
  const auto [start, end] = batch;
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> line_numbers;
  for (size_t k = start; k < end; ++k) {
    rows.push_back(ids[todo[k]]);
    line_numbers.push_back(first_line + static_cast<int64_t>(todo[k]));
  }
  const auto src = pad_sequences(rows, kPadId);
  const auto hyps = search(scorer, src, options.search, line_numbers);
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
  if (options.attention) attach_attention(scorer, vocabs, src, rows, best, options, results);
  for (auto* t : results) t->done = true;
  return output_tokens;
}

}  // namespace

std::vector<Translation> translate_lines(Scorer& scorer, const Vocabs& vocabs,
                                         const std::vector<std::string>& lines,
                                         const TranslateOptions& options, TranslateStats* stats,
                                         const JobControl& job) {
  check_attention_options(scorer, options);
  const auto nbest = static_cast<size_t>(options.search.nbest);
  TranslateStats s;
  s.lines = static_cast<int64_t>(lines.size());
  std::vector<std::vector<int64_t>> ids;
  const std::vector<size_t> todo =
      encode_lines(scorer, vocabs, lines, options.source_prefix_id, ids, s);
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
                                       job.first_line, out);
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
                                        const TranslateOptions& options, TranslateStats* stats) {
  std::vector<std::string> out;
  out.reserve(lines.size());
  for (auto& t : translate_lines(scorer, vocabs, lines, options, stats))
    out.push_back(std::move(t.texts[0]));
  return out;
}

namespace {

void write_result(std::ostream& out, const Translation& r, int64_t index,
                  const StreamOptions& stream) {
  if (stream.nbest) {
    for (size_t j = 0; j < r.texts.size(); ++j)
      out << index << " ||| " << r.texts[j] << " ||| " << format_score(r.scores[j]) << '\n';
  } else if (stream.scores) {
    out << r.texts[0] << '\t' << format_score(r.scores[0]) << '\n';
  } else {
    out << r.texts[0] << '\n';
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
  JobControl job;
  job.on_lines = stream.on_lines;
  job.stop_requested = stream.stop_requested;
  bool stopped = false;
  auto flush_chunk = [&] {
    TranslateStats s;
    job.first_line = first_line;
    const auto results = translate_lines(scorer, vocabs, chunk, options, &s, job);
    size_t written = 0;
    for (; written < results.size() && results[written].done; ++written)
      write_result(out, results[written], first_line + static_cast<int64_t>(written), stream);
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
  return total;
}

}  // namespace nmt
