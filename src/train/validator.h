// Validation during training: the evaluation `nmt eval` runs (eval/evaluate.h) on the validation
// set, its row in metrics.jsonl, the best checkpoint, and patience for early stopping.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "config/config.h"
#include "eval/evaluate.h"
#include "model/device.h"
#include "model/seq2seq.h"
#include "text/vocabs.h"
#include "train/metrics_log.h"
#include "ckpt/checkpoint_state.h"

namespace nmt {

class Validator {
 public:
  // `valid` may be empty: validation then does nothing. Decodes in the run's precision, as
  // resolved for training (precision auto included).
  Validator(const Config& config, const Vocabs& vocabs, EvalSet valid, std::string run_dir,
            Precision precision);

  // Evaluates the model at state.step, logs and writes the row (to `metrics` when given), and
  // saves DIR/checkpoints/best when train.best_metric improved. Updates the best value and the
  // validations without improvement in `state`. Returns false when early stopping says
  // training should end.
  bool validate(Seq2Seq& model, CheckpointState& state, MetricsFile* metrics);

  // Evaluates the averaged checkpoint's weights (train.average_last) at `step` (training time
  // elapsed_s), logs and writes its row ("checkpoint": "averaged"); best and patience are left
  // alone. Returns its train.best_metric value, or nothing without a validation set.
  std::optional<double> validate_averaged(Seq2Seq& model, int64_t step, double elapsed_s,
                                          MetricsFile* metrics);

 private:
  // The evaluation and its train.best_metric value.
  std::pair<EvalResult, double> evaluate_model(Seq2Seq& model) const;

  const Config& config_;
  const Vocabs& vocabs_;
  Precision precision_;
  EvalSet valid_;
  std::string run_dir_;
};

}  // namespace nmt
