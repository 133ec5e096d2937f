// The run's curves (plot/curves.h) from its metrics.jsonl (train/metrics_log.h).
#pragma once

#include <string>

#include "plot/curves.h"

namespace nmt {

// The run in run_dir: DIR/metrics.jsonl, named after the directory.
CurveRun read_curve_run(const std::string& run_dir, const std::string& metric);

// Writes DIR/curves.svg (atomically) from DIR/metrics.jsonl.
void write_curves(const std::string& run_dir, const std::string& metric);

}  // namespace nmt
