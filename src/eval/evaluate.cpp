#include "eval/evaluate.h"

#include <chrono>
#include <cmath>

#include "decode/forced.h"
#include "decode/terms.h"
#include "text/spm.h"
#include "util/line_reader.h"
#include "util/util.h"

namespace nmt {

EvalSet make_eval_set(std::vector<std::string> src, std::vector<std::string> ref,
                      const Vocabs& vocabs, int64_t max_positions, int64_t tag_id) {
  if (src.size() != ref.size())
    throw Error("the source has " + std::to_string(src.size()) + " lines but the references " +
                std::to_string(ref.size()) + ": nothing is scored against the wrong line");
  EvalSet set;
  set.src = std::move(src);
  set.ref = std::move(ref);
  // Room for EOS (source) and BOS (target input).
  set.pairs =
      encode_corpus(set.src, set.ref, vocabs.src, vocabs.tgt, max_positions - 1, true, &set.stats);
  // The loss sees the source the translations see: the tag first, within the limit.
  for (auto& x : set.pairs.src) put_tag(x, tag_id, static_cast<size_t>(max_positions - 1));
  return set;
}

CorpusLoss corpus_loss(Scorer& scorer, const Corpus& corpus, int64_t batch_tokens) {
  // Sources end with EOS; targets are scored with theirs, as search scores a hypothesis.
  std::vector<std::vector<int64_t>> src, tgt;
  int64_t tokens = 0;
  for (size_t i = 0; i < corpus.src.size(); ++i) {
    src.emplace_back(corpus.src[i].begin(), corpus.src[i].end());
    src.back().push_back(kEosId);
    tgt.emplace_back(corpus.tgt[i].begin(), corpus.tgt[i].end());
    tokens += static_cast<int64_t>(corpus.tgt[i].size()) + 1;
  }
  double log_prob = 0;
  for (const double lp : forced_decode(scorer, src, tgt, batch_tokens, Precision::kFp32))
    log_prob += lp;
  CorpusLoss r;
  r.tokens = tokens;
  r.nll_sum = -log_prob;
  r.nll_per_token = tokens > 0 ? r.nll_sum / static_cast<double>(tokens) : 0.0;
  r.ppl = std::exp(r.nll_per_token);
  return r;
}

CorpusLoss corpus_loss(Seq2Seq& model, const Corpus& corpus, int64_t batch_tokens) {
  const bool was_training = model->is_training();
  model->eval();
  ModelScorer scorer(model);
  const CorpusLoss r = corpus_loss(scorer, corpus, batch_tokens);
  model->train(was_training);
  return r;
}

EvalResult evaluate(Seq2Seq& model, const Vocabs& vocabs, const EvalSet& set,
                    const TranslateOptions& options, int64_t loss_batch_tokens) {
  const bool was_training = model->is_training();
  model->eval();
  ModelScorer scorer(model);
  EvalResult r = evaluate(scorer, vocabs, set, options, loss_batch_tokens);
  model->train(was_training);
  return r;
}

EvalResult evaluate(Scorer& scorer, const Vocabs& vocabs, const EvalSet& set,
                    const TranslateOptions& options, int64_t loss_batch_tokens) {
  EvalResult r;
  r.loss = corpus_loss(scorer, set.pairs, loss_batch_tokens);
  const auto start = std::chrono::steady_clock::now();
  r.hyps = translate_best(scorer, vocabs, set.src, options, &r.stats, set.terms);
  r.translate_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.bleu = corpus_bleu(r.hyps, set.ref);
  r.chrf = corpus_chrf(r.hyps, set.ref);
  return r;
}

namespace {

// Two aligned files read a chunk at a time; refuses files whose line counts differ.
class AlignedChunks {
 public:
  // Named in errors as `a_name` and `b_name` ("--src FILE").
  AlignedChunks(const std::string& a, std::string a_name, const std::string& b, std::string b_name)
      : a_(a), b_(b), a_name_(std::move(a_name)), b_name_(std::move(b_name)) {}
  // The next chunk of up to `lines` pairs; false at the end of both files.
  bool next(int64_t lines, std::vector<std::string>& a, std::vector<std::string>& b) {
    a.clear();
    b.clear();
    std::string x, y;
    while (static_cast<int64_t>(a.size()) < lines) {
      const bool has_x = a_.next(x), has_y = b_.next(y);
      if (has_x != has_y) {
        while (a_.next(x)) {
        }
        while (b_.next(y)) {
        }
        throw Error(a_name_ + " has " + std::to_string(a_.lines()) + " lines but " + b_name_ +
                    " has " + std::to_string(b_.lines()) +
                    ": nothing is scored against the wrong line");
      }
      if (!has_x) break;
      a.push_back(std::move(x));
      b.push_back(std::move(y));
    }
    return !a.empty();
  }

 private:
  LineReader a_, b_;
  std::string a_name_, b_name_;
};

}  // namespace

FileEval evaluate_files(Seq2Seq& model, const Vocabs& vocabs, const std::string& src,
                        const std::string& ref, const TranslateOptions& options,
                        int64_t loss_batch_tokens,
                        const std::function<void(const std::string&)>& on_hypothesis,
                        int64_t chunk_lines) {
  ModelScorer scorer(model);
  return evaluate_files(scorer, vocabs, src, ref, options, loss_batch_tokens, on_hypothesis,
                        chunk_lines);
}

FileEval evaluate_files(Scorer& scorer, const Vocabs& vocabs, const std::string& src,
                        const std::string& ref, const TranslateOptions& options,
                        int64_t loss_batch_tokens,
                        const std::function<void(const std::string&)>& on_hypothesis,
                        int64_t chunk_lines) {
  FileEval out;
  BleuStats bleu, bleu_lc(true);
  ChrfStats chrf;
  double nll = 0;
  AlignedChunks chunks(src, "--src " + src, ref, "--ref " + ref);
  TermFiles term_files(options.constraints_file, options.avoid_file);
  std::vector<std::string> src_lines, ref_lines;
  while (chunks.next(chunk_lines, src_lines, ref_lines)) {
    EvalSet set = make_eval_set(std::move(src_lines), std::move(ref_lines), vocabs,
                                scorer.max_positions(), options.tag_id);
    if (term_files.active())
      term_files.read(static_cast<int64_t>(set.src.size()), set.terms.constraints,
                      set.terms.avoid);
    const EvalResult r = evaluate(scorer, vocabs, set, options, loss_batch_tokens);
    for (size_t i = 0; i < r.hyps.size(); ++i) {
      bleu.add(r.hyps[i], set.ref[i]);
      bleu_lc.add(r.hyps[i], set.ref[i]);
      chrf.add(r.hyps[i], set.ref[i]);
      on_hypothesis(r.hyps[i]);
    }
    nll += r.loss.nll_sum;
    out.result.loss.tokens += r.loss.tokens;
    out.result.translate_seconds += r.translate_seconds;
    out.result.stats += r.stats;
    out.pairs += set.stats;
    out.sentences += static_cast<int64_t>(set.src.size());
    src_lines.clear();
    ref_lines.clear();
  }
  term_files.finish();
  auto& loss = out.result.loss;
  loss.nll_sum = nll;
  loss.nll_per_token = loss.tokens > 0 ? nll / static_cast<double>(loss.tokens) : 0.0;
  loss.ppl = std::exp(loss.nll_per_token);
  out.result.bleu = bleu.result();
  out.result.chrf = chrf.result();
  out.bleu_lowercase = bleu_lc.result();
  return out;
}

FileEval score_files(const std::string& hyp, const std::string& ref) {
  FileEval out;
  BleuStats bleu, bleu_lc(true);
  ChrfStats chrf;
  AlignedChunks chunks(hyp, "--hyp " + hyp, ref, "--ref " + ref);
  std::vector<std::string> h, r;
  while (chunks.next(100000, h, r)) {
    for (size_t i = 0; i < h.size(); ++i) {
      bleu.add(h[i], r[i]);
      bleu_lc.add(h[i], r[i]);
      chrf.add(h[i], r[i]);
    }
    out.sentences += static_cast<int64_t>(h.size());
  }
  out.result.bleu = bleu.result();
  out.result.chrf = chrf.result();
  out.bleu_lowercase = bleu_lc.result();
  return out;
}

EvalScores::EvalScores(const EvalResult& r)
    : loss(r.loss.nll_per_token),
      ppl(r.loss.ppl),
      loss_tokens(r.loss.tokens),
      bleu(r.bleu.score),
      chrf(r.chrf.score) {}

nlohmann::json EvalScores::to_json(const std::string& prefix) const {
  return {{prefix + "loss", loss},
          {prefix + "ppl", ppl},
          {prefix + "loss_tokens", loss_tokens},
          {prefix + "bleu", bleu},
          {prefix + "chrf", chrf}};
}

EvalScores EvalScores::from_json(const nlohmann::json& j, const std::string& prefix) {
  EvalScores s;
  s.loss = j.at(prefix + "loss").get<double>();
  s.ppl = j.at(prefix + "ppl").get<double>();
  // Validation rows written before the eval and validation keys were unified say "valid_tokens".
  const auto tokens_key =
      j.contains(prefix + "loss_tokens") ? prefix + "loss_tokens" : prefix + "tokens";
  s.loss_tokens = j.at(tokens_key).get<int64_t>();
  s.bleu = j.at(prefix + "bleu").get<double>();
  s.chrf = j.at(prefix + "chrf").get<double>();
  return s;
}

}  // namespace nmt
