// Training curves as SVG, drawn from metrics.jsonl (train/metrics_log.h): DIR/curves.svg for one
// run, written at every validation and at the end of training, and `nmt plot` for several runs
// overlaid. Three panels against the step: losses (training label-smoothed loss and NLL,
// validation NLL), the validation metric, and the learning rate. Training time is on a second
// axis for one run and in the legend for several.
//
// For tests and tools, every series is a <g class="series" data-run data-series data-steps
// data-values> holding the exact metrics.jsonl numbers, and every panel a <g class="panel"
// data-panel data-x="px0 px1 step0 step1" data-y="px0 px1 value0 value1"> mapping them to pixels.
#pragma once

#include <string>
#include <vector>

#include "train/metrics_log.h"

namespace nmt {

struct CurveRun {
  std::string name;             // legend label
  Metrics metrics;              // its rows
  std::string metric = "bleu";  // validation metric panel: bleu | chrf
};

// A standalone SVG document. Throws Error on an unknown metric. Runs without rows are listed in
// the legend as "no rows yet".
std::string curves_svg(const std::vector<CurveRun>& runs, const std::string& title);

// The run in run_dir: DIR/metrics.jsonl, named after the directory.
CurveRun read_curve_run(const std::string& run_dir, const std::string& metric);

// Writes DIR/curves.svg (atomically) from DIR/metrics.jsonl.
void write_curves(const std::string& run_dir, const std::string& metric);

}  // namespace nmt
