#include "decode/translate.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <mutex>
#include <ostream>

#include "data/tensors.h"
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

// Runs job(i) for every i < n, on up to `workers` OpenMP threads side by side, the last (longest)
// jobs first. Inside the parallel region LibTorch's loops and OpenBLAS run on the calling thread,
// so a job's ops need no synchronisation between threads. The first exception is rethrown.
// Without OpenMP (CUDA builds) the jobs run one after another.
template <typename Job>
void run_side_by_side(size_t n, int64_t workers, const Job& job) {
  const auto count = static_cast<int64_t>(n);
  if (workers <= 1 || count <= 1) {
    for (int64_t i = 0; i < count; ++i) job(static_cast<size_t>(i));
    return;
  }
  [[maybe_unused]] const auto threads = static_cast<int>(std::min(workers, count));  // OpenMP only
  std::exception_ptr error;
  std::mutex mutex;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t i = 0; i < count; ++i) {
    try {
      job(static_cast<size_t>(count - 1 - i));
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
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
  const int64_t prefix = prefix_id >= 0 ? 1 : 0;
  const int64_t max_src = scorer.max_positions() - 1 - prefix;  // room for EOS and the prefix
  ids.assign(lines.size(), {});
  std::vector<size_t> todo;
  for (size_t i = 0; i < lines.size(); ++i) {
    int64_t replaced = 0;
    const std::string clean = sanitize_utf8(lines[i], &replaced);
    s.replaced_bytes += replaced;
    if (trim(clean).empty()) continue;
    auto pieces = vocabs.src.encode(clean);
    if (pieces.empty()) continue;
    if (static_cast<int64_t>(pieces.size()) > max_src) {
      pieces.resize(max_src);
      ++s.truncated;
    }
    if (prefix > 0) ids[i].push_back(prefix_id);
    ids[i].insert(ids[i].end(), pieces.begin(), pieces.end());
    ids[i].push_back(kEosId);
    todo.push_back(i);
  }
  std::stable_sort(todo.begin(), todo.end(),
                   [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  return todo;
}

// [start, end) ranges of `todo` (sorted ascending, so a batch's last row sets its width) whose
// padded cells stay within the budget.
std::vector<std::pair<size_t, size_t>> plan_batches(const std::vector<std::vector<int64_t>>& ids,
                                                    const std::vector<size_t>& todo,
                                                    int64_t budget) {
  std::vector<std::pair<size_t, size_t>> batches;
  for (size_t start = 0; start < todo.size();) {
    size_t end = start + 1;
    while (end < todo.size() &&
           static_cast<int64_t>((end - start + 1) * ids[todo[end]].size()) <= budget)
      ++end;
    batches.emplace_back(start, end);
    start = end;
  }
  return batches;
}

}  // namespace

std::vector<Translation> translate_lines(Scorer& scorer, const Vocabs& vocabs,
                                         const std::vector<std::string>& lines,
                                         const TranslateOptions& options, TranslateStats* stats) {
  check_attention_options(scorer, options);
  const auto nbest = static_cast<size_t>(options.search.nbest);
  TranslateStats s;
  s.lines = static_cast<int64_t>(lines.size());
  std::vector<std::vector<int64_t>> ids;
  const std::vector<size_t> todo =
      encode_lines(scorer, vocabs, lines, options.source_prefix_id, ids, s);
  // Beams multiply the rows a batch decodes, so the budget covers all of them.
  const auto batches =
      plan_batches(ids, todo, std::max<int64_t>(1, options.batch_tokens / options.search.beam_size));

  std::vector<Translation> out(lines.size());
  for (auto& t : out) {
    t.texts.assign(nbest, "");
    t.scores.assign(nbest, 0.0);
  }
  std::vector<int64_t> output_tokens(batches.size(), 0);
  auto translate_batch = [&](size_t b) {
    // Autocast state is per thread.
    const AutocastGuard autocast(scorer.device(), options.precision);
    const auto [start, end] = batches[b];
    std::vector<std::vector<int64_t>> rows;
    for (size_t k = start; k < end; ++k) rows.push_back(ids[todo[k]]);
    const auto src = pad_sequences(rows, kPadId);
    const auto hyps = search(scorer, src, options.search);
    std::vector<const Hypothesis*> best;
    std::vector<Translation*> results;
    static const Hypothesis kNone;
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
      output_tokens[b] += static_cast<int64_t>(top->tokens.size()) + (top->ended ? 1 : 0);
      best.push_back(top);
      results.push_back(&t);
    }
    if (options.attention) attach_attention(scorer, vocabs, src, rows, best, options, results);
  };
  const bool side_by_side = static_cast<int64_t>(batches.size()) >=
                            options.min_batches_per_worker * options.batch_workers;
  run_side_by_side(batches.size(), side_by_side ? options.batch_workers : 1, translate_batch);
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

TranslateStats translate_stream(Scorer& scorer, const Vocabs& vocabs, LineReader& in,
                                std::ostream& out, const TranslateOptions& options,
                                const StreamOptions& stream) {
  if (stream.chunk_lines < 1) throw Error("chunk_lines must be >= 1");
  TranslateStats total;
  std::vector<std::string> chunk;
  int64_t first_line = 0;  // 0-based index of the chunk's first line
  auto flush_chunk = [&] {
    TranslateStats s;
    const auto results = translate_lines(scorer, vocabs, chunk, options, &s);
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      const int64_t index = first_line + static_cast<int64_t>(i);
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
    out.flush();
    if (!out) throw Error("cannot write output");
    total.lines += s.lines;
    total.truncated += s.truncated;
    total.replaced_bytes += s.replaced_bytes;
    total.output_tokens += s.output_tokens;
    first_line += static_cast<int64_t>(chunk.size());
    chunk.clear();
  };
  std::string line;
  while (in.next(line)) {
    chunk.push_back(std::move(line));
    if (static_cast<int64_t>(chunk.size()) >= stream.chunk_lines) flush_chunk();
  }
  if (!chunk.empty()) flush_chunk();
  return total;
}

}  // namespace nmt
