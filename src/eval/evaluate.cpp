#include "eval/evaluate.h"

#include <chrono>
#include <cmath>

#include "data/batching.h"
#include "data/tensors.h"
#include "model/loss.h"
#include "util/util.h"

namespace nmt {

EvalSet make_eval_set(std::vector<std::string> src, std::vector<std::string> ref,
                      const Vocabs& vocabs, int64_t max_positions) {
  if (src.size() != ref.size())
    throw Error("the source has " + std::to_string(src.size()) + " lines but the references " +
                std::to_string(ref.size()) + ": nothing is scored against the wrong line");
  EvalSet set;
  set.src = std::move(src);
  set.ref = std::move(ref);
  // Room for EOS (source) and BOS (target input).
  set.pairs =
      encode_corpus(set.src, set.ref, vocabs.src, vocabs.tgt, max_positions - 1, true, &set.stats);
  return set;
}

CorpusLoss corpus_loss(Seq2Seq& model, const Corpus& corpus, int64_t batch_tokens) {
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Device device = model->device();
  const auto plan =
      make_batches(sequence_lengths(corpus.src), sequence_lengths(corpus.tgt), batch_tokens, 0);
  // Summed on the device, read once.
  auto nll = torch::zeros({}, torch::dtype(torch::kDouble).device(device));
  int64_t tokens = 0;
  for (const auto& rows : plan) {
    const auto b = to_device(make_tensor_batch(corpus, rows), device);
    auto logits = model->forward(b.src, b.tgt_in);
    auto sums =
        label_smoothed_loss(logits.view({-1, logits.size(-1)}), b.tgt_out.view(-1), 0.0, kPadId);
    nll += sums.nll.to(torch::kDouble);
    tokens += b.tgt_tokens;
  }
  model->train(was_training);
  CorpusLoss r;
  r.tokens = tokens;
  r.nll_per_token = tokens > 0 ? nll.item<double>() / static_cast<double>(tokens) : 0.0;
  r.ppl = std::exp(r.nll_per_token);
  return r;
}

EvalResult evaluate(Seq2Seq& model, const Vocabs& vocabs, const EvalSet& set,
                    const TranslateOptions& options, int64_t loss_batch_tokens) {
  EvalResult r;
  r.loss = corpus_loss(model, set.pairs, loss_batch_tokens);
  const bool was_training = model->is_training();
  model->eval();
  const auto start = std::chrono::steady_clock::now();
  r.hyps = translate_best(model, vocabs, set.src, options, &r.stats);
  r.translate_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  model->train(was_training);
  r.bleu = corpus_bleu(r.hyps, set.ref);
  r.chrf = corpus_chrf(r.hyps, set.ref);
  return r;
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
