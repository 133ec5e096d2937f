#include "train/validator.h"

#include <spdlog/spdlog.h>

#include "ckpt/checkpoint.h"
#include "util/log.h"

namespace nmt {

Validator::Validator(const Config& config, const Vocabs& vocabs, EvalSet valid, std::string run_dir,
                     Precision precision)
    : config_(config),
      vocabs_(vocabs),
      precision_(precision),
      valid_(std::move(valid)),
      run_dir_(std::move(run_dir)) {}

std::pair<EvalResult, double> Validator::evaluate_model(Seq2Seq& model) const {
  const auto& tc = config_.train;
  TranslateOptions options = translate_options(config_, tc.valid_beam);
  // Decoded as trained: a run in bf16 or fp16 is validated in that precision.
  options.precision = precision_;
  auto r = evaluate(model, vocabs_, valid_, options, tc.batch_tokens);
  clear_progress();
  const double value = tc.best_metric == BestMetric::kBleu   ? r.bleu.score
                       : tc.best_metric == BestMetric::kChrf ? r.chrf.score
                                                             : r.loss.nll_per_token;
  return {std::move(r), value};
}

std::optional<double> Validator::validate_averaged(Seq2Seq& model, int64_t step, double elapsed_s,
                                                   MetricsFile* metrics) {
  if (valid_.empty()) return std::nullopt;
  const auto [r, value] = evaluate_model(model);
  spdlog::info(
      "validation of the averaged checkpoint: nll {:.4f}, ppl {:.2f}, BLEU {:.2f}, chrF2 {:.2f} "
      "({} tokens, beam {})",
      r.loss.nll_per_token, r.loss.ppl, r.bleu.score, r.chrf.score, r.loss.tokens,
      config_.train.valid_beam);
  if (metrics != nullptr) {
    const ValidRow row{step, EvalScores(r), /*best=*/false, /*checkpoint=*/"averaged", elapsed_s};
    metrics->write(to_json(row));
  }
  return value;
}

bool Validator::validate(Seq2Seq& model, CheckpointState& state, MetricsFile* metrics) {
  if (valid_.empty()) return true;
  const auto& tc = config_.train;
  const auto [r, value] = evaluate_model(model);
  state.has_valid_value = true;
  state.valid_value = value;
  const bool improved =
      !state.has_best ||
      (higher_is_better(tc.best_metric) ? value > state.best_value : value < state.best_value);
  spdlog::info(
      "validation at step {}: nll {:.4f}, ppl {:.2f}, BLEU {:.2f}, chrF2 {:.2f} "
      "({} tokens, beam {}){}",
      state.step, r.loss.nll_per_token, r.loss.ppl, r.bleu.score, r.chrf.score, r.loss.tokens,
      tc.valid_beam, improved ? " *best*" : "");
  if (metrics != nullptr) {
    metrics->write(to_json(ValidRow{state.step, EvalScores(r), improved, "", state.elapsed_s}));
  }
  if (improved) {
    state.has_best = true;
    state.best_value = value;
    state.best_step = state.step;
    state.validations_without_improvement = 0;
    CheckpointState st = state;
    st.best_metric = tc.best_metric;
    st.saved_best_value = value;
    const auto path =
        save_model_checkpoint(best_checkpoint_dir(run_dir_), config_, vocabs_, model, st);
    if (!path.empty())
      spdlog::info("saved best checkpoint {} ({} {:.4f})", path, name_of(tc.best_metric), value);
    return true;
  }
  ++state.validations_without_improvement;
  if (tc.patience > 0 && state.validations_without_improvement >= tc.patience) {
    spdlog::info(
        "early stopping: valid {} has not improved in {} validations; best {:.4f} at step {}",
        name_of(tc.best_metric), state.validations_without_improvement, state.best_value,
        state.best_step);
    return false;
  }
  return true;
}

}  // namespace nmt
