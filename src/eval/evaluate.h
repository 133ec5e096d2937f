// The one evaluation of a model on a parallel set, shared by `nmt eval` and by validation during
// training: the teacher-forced loss of the references, the translations, BLEU and chrF.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "decode/scorer.h"
#include "decode/translate.h"
#include "eval/metrics.h"
#include "model/seq2seq.h"
#include "text/vocabs.h"

namespace nmt {

// A source file and its references, as raw lines (translated and scored) and encoded pairs (for
// the loss).
struct EvalSet {
  std::vector<std::string> src, ref;  // aligned lines
  Corpus pairs;        // encodable pairs; those longer than the model takes are truncated
  CorpusStats stats;   // what encoding kept and dropped (empty or invalid UTF-8 pairs)
  LineTerms terms;     // phrases to include and avoid per source line (none when empty)
  bool empty() const { return src.empty(); }
};

// Encodes the pairs for a model taking max_positions positions, each source after tag_id when
// it is >= 0 (a tag, as translate_lines puts it). Throws Error when the
// line counts differ: nothing is scored against the wrong line.
EvalSet make_eval_set(std::vector<std::string> src, std::vector<std::string> ref,
                      const Vocabs& vocabs, int64_t max_positions, int64_t tag_id = -1);

struct CorpusLoss {
  double nll_per_token = 0;  // mean negative log-likelihood per target token (EOS included)
  double ppl = 0;            // exp(nll_per_token)
  int64_t tokens = 0;        // target tokens scored
  double nll_sum = 0;        // the NLL summed over those tokens
};

// Teacher-forced loss of a corpus on the scorer's device, by forced decoding (decode/forced.h)
// within a token budget: of an ensemble, its mixture's. The models must be in eval mode.
CorpusLoss corpus_loss(Scorer& scorer, const Corpus& corpus, int64_t batch_tokens);
// One model's, switched to eval mode and back to the mode it was in.
CorpusLoss corpus_loss(Seq2Seq& model, const Corpus& corpus, int64_t batch_tokens);

struct EvalResult {
  CorpusLoss loss;
  BleuResult bleu;
  ChrfResult chrf;
  std::vector<std::string> hyps;  // the translations, one per source line
  TranslateStats stats;           // of the translation
  double translate_seconds = 0;   // wall time of the translation
};

// Translates set.src with `options` and scores it against set.ref; the loss batches hold
// loss_batch_tokens tokens. The models must be in eval mode.
EvalResult evaluate(Scorer& scorer, const Vocabs& vocabs, const EvalSet& set,
                    const TranslateOptions& options, int64_t loss_batch_tokens);
// One model's, put in eval mode and back.
EvalResult evaluate(Seq2Seq& model, const Vocabs& vocabs, const EvalSet& set,
                    const TranslateOptions& options, int64_t loss_batch_tokens);

// An evaluation of files of any length (nmt eval): what evaluate() gives, with the lowercased
// BLEU and the counts, gathered a chunk at a time.
struct FileEval {
  EvalResult result;       // its hyps stay empty: they went to on_hypothesis
  BleuResult bleu_lowercase;
  CorpusStats pairs;       // what encoding for the loss kept and dropped
  int64_t sentences = 0;
};

// Translates `src` and scores it against `ref`, reading both a chunk of chunk_lines lines at a
// time: memory does not grow with the files. Each translation goes to on_hypothesis in input
// order. Files of up to chunk_lines lines give exactly evaluate()'s numbers. Throws Error when
// the line counts differ.
FileEval evaluate_files(Scorer& scorer, const Vocabs& vocabs, const std::string& src,
                        const std::string& ref, const TranslateOptions& options,
                        int64_t loss_batch_tokens,
                        const std::function<void(const std::string&)>& on_hypothesis,
                        int64_t chunk_lines = 100000);
// One model's (in eval mode).
FileEval evaluate_files(Seq2Seq& model, const Vocabs& vocabs, const std::string& src,
                        const std::string& ref, const TranslateOptions& options,
                        int64_t loss_batch_tokens,
                        const std::function<void(const std::string&)>& on_hypothesis,
                        int64_t chunk_lines = 100000);

// Scores the lines of `hyp` against `ref` the same way, without a model.
FileEval score_files(const std::string& hyp, const std::string& ref);

// An evaluation's numbers under the names every report uses: `nmt eval --json` and the
// validation rows of metrics.jsonl (with the prefix "valid_").
struct EvalScores {
  double loss = 0;          // NLL per reference token
  double ppl = 0;           // exp(loss)
  int64_t loss_tokens = 0;  // reference tokens the loss covers
  double bleu = 0;          // corpus BLEU
  double chrf = 0;          // corpus chrF2

  explicit EvalScores(const EvalResult& r);
  EvalScores() = default;
  // {"loss", "ppl", "loss_tokens", "bleu", "chrf"}, each name with `prefix`.
  nlohmann::json to_json(const std::string& prefix = "") const;
  // Throws nlohmann::json::exception when a field is missing or mistyped.
  static EvalScores from_json(const nlohmann::json& j, const std::string& prefix = "");
};

}  // namespace nmt
