// Training curves as SVG: losses, the validation metric and the learning rate against the step,
// for one run (DIR/curves.svg, train/curves.h) or several overlaid (`nmt plot`). Training time is
// on a second axis for one run and in the legend for several. The drawing takes plain numbers;
// reading them from metrics.jsonl is the trainer's (train/curves.h).
//
// For tests and tools, every series is a <g class="series" data-run data-series data-steps
// data-values> holding the exact metrics.jsonl numbers, and every panel a <g class="panel"
// data-panel data-x="px0 px1 step0 step1" data-y="px0 px1 value0 value1"> mapping them to pixels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

// A training row's numbers.
struct CurveTrain {
  int64_t step = 0;
  double loss = 0;       // label-smoothed loss per target token
  double ppl = 0;        // exp(NLL per target token); 0: none
  double lr = 0;         // learning rate
  double elapsed_s = 0;  // training time so far
};

// A validation row's numbers.
struct CurveValid {
  int64_t step = 0;
  double loss = 0;          // NLL per target token
  double bleu = 0, chrf = 0;
  std::string checkpoint;   // "" for the model in training, else e.g. "averaged" (a marker)
};

struct CurveRun {
  std::string name;             // legend label
  std::vector<CurveTrain> train;
  std::vector<CurveValid> valid;
  std::string metric = "bleu";  // validation metric panel: bleu | chrf
};

// A standalone SVG document. Throws Error on an unknown metric. Runs without rows are listed in
// the legend as "no rows yet".
std::string curves_svg(const std::vector<CurveRun>& runs, const std::string& title);

}  // namespace nmt
