#include "train/curves.h"

#include <filesystem>

#include "train/metrics_log.h"
#include "util/io.h"
#include "util/util.h"

namespace nmt {

CurveRun read_curve_run(const std::string& run_dir, const std::string& metric) {
  const std::string path = run_dir + "/metrics.jsonl";
  if (!file_exists(path)) throw Error("no metrics in " + run_dir + " (expected " + path + ")");
  CurveRun run;
  auto name = std::filesystem::path(run_dir).lexically_normal().filename().string();
  if (name.empty())
    name = std::filesystem::path(run_dir).lexically_normal().parent_path().filename();
  run.name = name.empty() ? run_dir : name;
  run.metric = metric;
  const Metrics metrics = read_metrics(path);
  for (const auto& r : metrics.train) run.train.push_back({r.step, r.loss, r.ppl, r.lr, r.elapsed_s});
  for (const auto& r : metrics.valid)
    run.valid.push_back({r.step, r.scores.loss, r.scores.bleu, r.scores.chrf, r.checkpoint});
  return run;
}

void write_curves(const std::string& run_dir, const std::string& metric) {
  const auto run = read_curve_run(run_dir, metric);
  write_file_atomic(run_dir + "/curves.svg", curves_svg({run}, "Training curves: " + run.name));
}

}  // namespace nmt
