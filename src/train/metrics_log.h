// metrics.jsonl, the run's numbers: one JSON object per line, written by the trainer and read by
// tools (benchmarks, plots). Its two row formats, their field names and the accounting of the
// steps between training rows are defined here only.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "data/tensors.h"
#include "eval/evaluate.h"
#include "train/step.h"
#include "util/io.h"

namespace nmt {

// A training row: the steps since the previous row.
struct TrainRow {
  int64_t step = 0;          // optimizer steps done
  int64_t epoch = 0;         // 1-based epoch
  double loss = 0;           // label-smoothed loss per target token
  double ppl = 0;            // exp(NLL per target token)
  double lr = 0;             // learning rate of the last step
  double grad_norm = 0;      // gradient norm of the last step, before clipping
  int64_t tgt_tokens = 0;    // target tokens trained on
  double tok_per_s = 0;      // target tokens per second of wall time
  double elapsed_s = 0;      // training time so far, across resumes
  PhaseTimes phases;         // seconds in each phase (the rest is logging and saving)
  double src_pad_ratio = 0;  // padded source cells per real token: 1.0 means no padding
  double tgt_pad_ratio = 0;  // the same for the target
};

// A validation row: the evaluation's scores (eval/evaluate.h), named with the prefix "valid_",
// and whether they were the best so far. The averaged checkpoint's validation at the end of
// training (train.average_last) is a row with "checkpoint": "averaged".
struct ValidRow {
  int64_t step = 0;
  EvalScores scores;
  bool best = false;
  std::string checkpoint;  // "" for the model in training, "averaged" for DIR/checkpoints/averaged
  // Training time at the validation (the clock of train.max_time); none in rows written before
  // validation rows had it.
  std::optional<double> elapsed_s;
};

nlohmann::json to_json(const TrainRow& row);
nlohmann::json to_json(const ValidRow& row);

// The rows of a metrics.jsonl, in file order; unreadable lines are skipped.
struct Metrics {
  std::vector<TrainRow> train;
  std::vector<ValidRow> valid;
};
Metrics read_metrics(const std::string& path);

// Accumulates the steps between two training rows.
class Interval {
 public:
  Interval() { restart(); }
  // A step's batches (padding), its result (losses, tokens, times) and learning rate.
  void add(const std::vector<TensorBatch>& batches, const StepResult& step, double lr);
  // Time outside steps that the row should still count as data time.
  void add_data_time(double seconds) { phases_.data += seconds; }
  // The row for the steps so far, then starts a new interval.
  TrainRow close(int64_t step, int64_t epoch, double elapsed_s);

 private:
  void restart();

  std::chrono::steady_clock::time_point start_;
  int64_t tokens_ = 0;
  double loss_ = 0, nll_ = 0, lr_ = 0, grad_norm_ = 0;
  PhaseTimes phases_;
  int64_t src_cells_ = 0, tgt_cells_ = 0, src_tokens_ = 0, tgt_tokens_ = 0;
};

// The status line a terminal shows between log rows: "step 120 | epoch 1 | loss 3.142 |
// lr 1.23e-04 | ETA 0:01:02".
std::string progress_line(int64_t step, int64_t epoch, double loss, double lr, double eta_seconds);

// Appends rows to DIR/metrics.jsonl, each written through at once (a failed write throws).
class MetricsFile {
 public:
  // Rows of steps after keep_through_step are dropped first: on a resume, the interrupted run's
  // steps after its checkpoint are about to be redone; on a fresh start (0), a failed earlier
  // attempt's rows go. A row cut short by a full disk is dropped with them.
  MetricsFile(std::string path, int64_t keep_through_step);
  void write(const nlohmann::json& row);

 private:
  std::string path_;
  OutFile out_;
};

}  // namespace nmt
