// Training curves (train/curves.h): the SVG's structure, that its plotted points are the
// metrics.jsonl values, overlays, and end to end: DIR/curves.svg, `nmt plot`, and checkpoint
// averaging at the end of training (train.average_last / average_best) with --checkpoint RUN_DIR
// picking the better of best and averaged.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "helpers.h"
#include "train/curves.h"
#include "util/util.h"
#include "xml_check.h"

using namespace nmt;
using nlohmann::json;

namespace {

std::vector<double> numbers(const std::string& s) {
  std::vector<double> out;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) out.push_back(std::strtod(tok.c_str(), nullptr));
  return out;
}

// (x, y) pixel pairs of a polyline's points attribute.
std::vector<std::pair<double, double>> points_of(const std::string& s) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {
    const auto comma = tok.find(',');
    out.emplace_back(std::strtod(tok.substr(0, comma).c_str(), nullptr),
                     std::strtod(tok.substr(comma + 1).c_str(), nullptr));
  }
  return out;
}

const XmlNode* panel(const XmlNode& root, const std::string& id) {
  for (const XmlNode* g : find_all(root, "g", "panel"))
    if (g->attrs.at("data-panel") == id) return g;
  return nullptr;
}

// The series group of one run in a panel.
const XmlNode* series(const XmlNode& panel_node, const std::string& run, const std::string& id) {
  for (const XmlNode* g : find_all(panel_node, "g", "series"))
    if (g->attrs.at("data-run") == run && g->attrs.at("data-series") == id) return g;
  return nullptr;
}

// Checks that a series holds exactly (steps, values) and that its polyline puts each point at
// the pixel the panel's axes give it.
void expect_series(const XmlNode& root, const std::string& panel_id, const std::string& run,
                   const std::string& id, const std::vector<double>& steps,
                   const std::vector<double>& values) {
  SCOPED_TRACE(panel_id + "/" + run + "/" + id);
  const XmlNode* p = panel(root, panel_id);
  ASSERT_NE(p, nullptr);
  const XmlNode* s = series(*p, run, id);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(numbers(s->attrs.at("data-steps")), steps);
  EXPECT_EQ(numbers(s->attrs.at("data-values")), values);
  const auto xs = numbers(p->attrs.at("data-x"));
  const auto ys = numbers(p->attrs.at("data-y"));
  ASSERT_EQ(xs.size(), 4u);
  ASSERT_EQ(ys.size(), 4u);
  const auto lines = find_all(*s, "polyline");
  ASSERT_EQ(lines.size(), 1u);
  const auto pts = points_of(lines[0]->attrs.at("points"));
  ASSERT_EQ(pts.size(), steps.size());
  for (size_t i = 0; i < pts.size(); ++i) {
    const double want_x = xs[0] + (steps[i] - xs[2]) / (xs[3] - xs[2]) * (xs[1] - xs[0]);
    const double want_y = ys[0] + (values[i] - ys[2]) / (ys[3] - ys[2]) * (ys[1] - ys[0]);
    EXPECT_NEAR(pts[i].first, want_x, 0.006) << i;
    EXPECT_NEAR(pts[i].second, want_y, 0.006) << i;
    // Inside the plot area.
    EXPECT_GE(pts[i].first, std::min(xs[0], xs[1]) - 0.01);
    EXPECT_LE(pts[i].first, std::max(xs[0], xs[1]) + 0.01);
    EXPECT_GE(pts[i].second, std::min(ys[0], ys[1]) - 0.01);
    EXPECT_LE(pts[i].second, std::max(ys[0], ys[1]) + 0.01);
  }
}

CurveTrain train_row(int64_t step, double loss, double ppl, double lr, double elapsed) {
  return {step, loss, ppl, lr, elapsed};
}

CurveValid valid_row(int64_t step, double nll, double bleu, double chrf, std::string ckpt = "") {
  return {step, nll, bleu, chrf, std::move(ckpt)};
}

CurveRun sample_run(const std::string& name, double shift) {
  CurveRun run;
  run.name = name;
  run.train = {train_row(100, 7.25 + shift, 900.5, 1e-4, 61),
                       train_row(200, 5.5 + shift, 120.25, 2e-4, 125.5),
                       train_row(300, 4.125 + shift, 40.0, 1.5e-4, 3700)};
  run.valid = {valid_row(200, 4.75 + shift, 12.5 - shift, 40.25),
                       valid_row(300, 3.875 + shift, 21.0625 - shift, 48.5),
                       valid_row(300, 3.75 + shift, 22.5 - shift, 49.0, "averaged")};
  return run;
}

}  // namespace

TEST(Curves, PlottedPointsAreTheMetricsValues) {
  const CurveRun run = sample_run("tiny-run", 0);
  const std::string svg = curves_svg({run}, "Training curves: tiny-run");
  XmlNode root;
  ASSERT_EQ(check_xml(svg, &root), "") << svg.substr(0, 2000);
  EXPECT_EQ(root.name, "svg");
  EXPECT_EQ(root.attrs["xmlns"], "http://www.w3.org/2000/svg");
  EXPECT_EQ(root.attrs["viewBox"], "0 0 " + root.attrs["width"] + " " + root.attrs["height"]);

  expect_series(root, "loss", "tiny-run", "train_loss", {100, 200, 300}, {7.25, 5.5, 4.125});
  expect_series(root, "loss", "tiny-run", "train_nll", {100, 200, 300},
                {std::log(900.5), std::log(120.25), std::log(40.0)});
  // The averaged checkpoint's row is not part of the validation line.
  expect_series(root, "loss", "tiny-run", "valid_nll", {200, 300}, {4.75, 3.875});
  expect_series(root, "metric", "tiny-run", "valid_bleu", {200, 300}, {12.5, 21.0625});
  expect_series(root, "lr", "tiny-run", "lr", {100, 200, 300}, {1e-4, 2e-4, 1.5e-4});

  // The averaged checkpoint: a marker with its value in the loss and metric panels.
  const auto averaged = find_all(*panel(root, "metric"), "g", "averaged");
  ASSERT_EQ(averaged.size(), 1u);
  EXPECT_EQ(averaged[0]->attrs.at("data-step"), "300");
  EXPECT_EQ(std::strtod(averaged[0]->attrs.at("data-value").c_str(), nullptr), 22.5);
  ASSERT_EQ(find_all(*panel(root, "loss"), "g", "averaged").size(), 1u);

  // Labelled axes, a legend naming the run with its steps and training time, a time axis.
  std::string all_text;
  for (const XmlNode* t : find_all(root, "text")) all_text += t->text + "\n";
  for (const char* want : {"nats per target token", "BLEU", "learning rate",
                           "step (grey: training time H:MM:SS)", "tiny-run (300 steps, 1:01:40)",
                           "validation NLL", "training loss (label-smoothed)", "1:01:40"})
    EXPECT_NE(all_text.find(want), std::string::npos) << want << " missing in\n" << all_text;
  EXPECT_EQ(find_all(root, "g", "legend-run").size(), 1u);
}

TEST(Curves, ChrfPanelAndOverlaidRuns) {
  CurveRun a = sample_run("a", 0), b = sample_run("b <&>", 0.5);
  a.metric = b.metric = "chrf";
  const std::string svg = curves_svg({a, b}, "sweep");
  XmlNode root;
  ASSERT_EQ(check_xml(svg, &root), "");
  expect_series(root, "metric", "a", "valid_chrf", {200, 300}, {40.25, 48.5});
  expect_series(root, "metric", "b <&>", "valid_chrf", {200, 300}, {40.25, 48.5});
  expect_series(root, "loss", "b <&>", "train_loss", {100, 200, 300}, {7.75, 6.0, 4.625});
  // One legend entry and one colour per run; no time axis when runs differ in time.
  const auto legend = find_all(root, "g", "legend-run");
  ASSERT_EQ(legend.size(), 2u);
  const auto stroke = [&](const std::string& run) {
    return find_all(*series(*panel(root, "lr"), run, "lr"), "polyline")[0]->attrs.at("stroke");
  };
  EXPECT_NE(stroke("a"), stroke("b <&>"));
  EXPECT_EQ(svg.find("grey: training time"), std::string::npos);

  CurveRun c = sample_run("c", 0);  // metric "bleu": runs must agree
  EXPECT_THROW(curves_svg({a, c}, "mixed"), Error);
}

TEST(Curves, RunWithoutRowsGivesAValidDocument) {
  CurveRun empty;
  empty.name = "fresh";
  const std::string svg = curves_svg({empty}, "nothing yet");
  XmlNode root;
  ASSERT_EQ(check_xml(svg, &root), "");
  EXPECT_NE(svg.find("fresh (no rows yet)"), std::string::npos);
  const XmlNode* s = series(*panel(root, "loss"), "fresh", "train_loss");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->attrs.at("data-steps"), "");
}

namespace {

std::vector<json> rows_of(const std::string& path) {
  std::vector<json> rows;
  for (const auto& line : nmt_test::read_lines_of(path)) rows.push_back(json::parse(line));
  return rows;
}

}  // namespace

// One short training run with validation every 15 steps, checkpoints every 15, keep_last 2,
// average_last 3 of the best by validation loss.
TEST(Curves, TrainingWritesCurvesAndAveragesTheBestCheckpoints) {
  nmt_test::TempDir dir;
  auto gen = nmt_test::run_command("python3 scripts/make_quickstart_data.py --out " +
                                   (dir / "data") + " --train 600 --valid 30 --test 10");
  ASSERT_EQ(gen.status, 0) << gen.output;
  const std::string d = dir / "data", run = dir / "run";
  const std::string train =
      nmt_test::nmt_bin() + " train --config configs/quickstart.json --run-dir " + run +
      " --set data.train_src=" + d + "/train.en --set data.train_tgt=" + d + "/train.de" +
      " --set data.valid_src=" + d + "/valid.en --set data.valid_tgt=" + d + "/valid.de" +
      " --set vocab.size=80 --set model.d_model=32 --set model.d_ff=64 --set model.heads=2" +
      " --set model.encoder_layers=1 --set model.decoder_layers=1" +
      " --set train.threads=1 --set train.batch_tokens=600 --set train.warmup_steps=20" +
      " --set train.log_every=5 --set train.save_every=15 --set train.valid_every=15" +
      " --set train.keep_last=2 --set train.best_metric=loss --set train.average_last=3" +
      " --set train.average_best=true --set train.max_steps=90";
  auto r = nmt_test::run_command(train);
  ASSERT_EQ(r.status, 0) << r.output;

  // The validation losses of the checkpoints, and the three best.
  const auto rows = rows_of(run + "/metrics.jsonl");
  std::vector<std::pair<double, int64_t>> by_loss;
  json averaged_row;
  for (const auto& row : rows) {
    if (!row.contains("valid_loss")) continue;
    if (row.contains("checkpoint")) {
      EXPECT_EQ(row["checkpoint"], "averaged");
      averaged_row = row;
    } else {
      by_loss.emplace_back(row["valid_loss"].get<double>(), row["step"].get<int64_t>());
    }
  }
  ASSERT_EQ(by_loss.size(), 6u);
  ASSERT_FALSE(averaged_row.is_null()) << "no validation row of the averaged checkpoint";
  EXPECT_EQ(averaged_row["step"], 90);
  std::sort(by_loss.begin(), by_loss.end(), [](const auto& x, const auto& y) {
    return x.first < y.first || (x.first == y.first && x.second > y.second);
  });
  auto ckpt = [&](int64_t step) {
    char name[32];
    std::snprintf(name, sizeof name, "ckpt-%08lld", static_cast<long long>(step));
    return run + "/checkpoints/" + name;
  };
  std::vector<std::string> best3;
  for (int i = 0; i < 3; ++i) best3.push_back(ckpt(by_loss[i].second));

  // Pruning kept the newest two and the three best.
  std::set<std::string> want(best3.begin(), best3.end());
  want.insert(ckpt(75));
  want.insert(ckpt(90));
  const auto kept = list_checkpoints(run);
  EXPECT_EQ(std::set<std::string>(kept.begin(), kept.end()), want);

  // The averaged checkpoint: the mean of the three best, validated, self-describing.
  const std::string averaged = run + "/checkpoints/averaged";
  const CheckpointState st = CheckpointState::read(averaged);
  const std::vector<std::string>& from = st.averaged_from;
  EXPECT_EQ(std::set<std::string>(from.begin(), from.end()),
            std::set<std::string>(best3.begin(), best3.end()));
  EXPECT_EQ(st.valid_value, averaged_row["valid_loss"].get<double>());
  EXPECT_EQ(st.best_metric, BestMetric::kLoss);
  {
    std::vector<LoadedModel> sources;
    for (const auto& b : best3) sources.push_back(load_model(b));
    const auto avg_model = load_model(averaged);
    for (const auto& p : avg_model.model->named_parameters()) {
      torch::Tensor sum = torch::zeros_like(p.value(), torch::kDouble);
      for (const auto& m : sources) sum += m.model->named_parameters()[p.key()].to(torch::kDouble);
      EXPECT_TRUE(torch::equal(p.value(), (sum / 3.0).to(torch::kFloat))) << p.key();
    }
  }

  // --checkpoint RUN_DIR takes the better of best and averaged by validation loss, and says so.
  const double best_loss = by_loss[0].first;
  const double avg_loss = averaged_row["valid_loss"].get<double>();
  const std::string picked = avg_loss < best_loss ? averaged : run + "/checkpoints/best";
  nmt_test::write_text(dir / "in.txt", "seven\n");
  r = nmt_test::run_command(nmt_test::nmt_bin() + " translate --checkpoint " + run +
                            " --threads 1 --input " + (dir / "in.txt") + " --output " +
                            (dir / "out.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("checkpoint: " + picked + " (validation loss"), std::string::npos)
      << r.output;
  EXPECT_EQ(resolve_checkpoint(run), picked);

  // DIR/curves.svg, as of the end of training, plots metrics.jsonl.
  const std::string svg = nmt_test::read_text(run + "/curves.svg");
  XmlNode root;
  ASSERT_EQ(check_xml(svg, &root), "") << svg.substr(0, 1000);
  std::vector<double> steps, losses, lrs, vsteps, vloss;
  for (const auto& row : rows) {
    if (row.contains("loss")) {
      steps.push_back(row["step"].get<double>());
      losses.push_back(row["loss"].get<double>());
      lrs.push_back(row["lr"].get<double>());
    } else if (!row.contains("checkpoint")) {
      vsteps.push_back(row["step"].get<double>());
      vloss.push_back(row["valid_loss"].get<double>());
    }
  }
  ASSERT_EQ(steps.size(), 18u);
  expect_series(root, "loss", "run", "train_loss", steps, losses);
  expect_series(root, "lr", "run", "lr", steps, lrs);
  expect_series(root, "loss", "run", "valid_nll", vsteps, vloss);
  ASSERT_EQ(find_all(*panel(root, "loss"), "g", "averaged").size(), 1u);

  // Resuming the finished run (as scripts/reproduce_multi30k.sh does) averages nothing again.
  r = nmt_test::run_command(train + " --resume");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("already is the mean of these 3 checkpoints"), std::string::npos)
      << r.output;
  EXPECT_EQ(rows_of(run + "/metrics.jsonl").size(), rows.size());

  // nmt plot overlays runs; a missing run directory is an error naming it.
  std::filesystem::copy(run, dir / "copy", std::filesystem::copy_options::recursive);
  r = nmt_test::run_command(nmt_test::nmt_bin() + " plot " + run + " " + (dir / "copy") +
                            " --output " + (dir / "sweep.svg"));
  ASSERT_EQ(r.status, 0) << r.output;
  XmlNode overlay;
  ASSERT_EQ(check_xml(nmt_test::read_text(dir / "sweep.svg"), &overlay), "");
  EXPECT_EQ(find_all(overlay, "g", "legend-run").size(), 2u);
  expect_series(overlay, "loss", "copy", "train_loss", steps, losses);
  r = nmt_test::run_command(nmt_test::nmt_bin() + " plot " + (dir / "nope") + " --output " +
                            (dir / "x.svg"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("no metrics in " + (dir / "nope")), std::string::npos) << r.output;
}

TEST(Curves, AveragingConfigIsChecked) {
  nmt_test::TempDir dir;
  const std::string base = nmt_test::nmt_bin() +
                           " train --config configs/quickstart.json --dump-config --run-dir " +
                           (dir / "run");
  struct Case {
    std::string set, message;
  };
  const std::vector<Case> cases = {
      {"train.average_last=1", "train.average_last: 0 (off) or at least 2"},
      {"train.average_best=true", "train.average_best: needs train.average_last >= 2"},
      {"train.average_last=9", "train.average_last: averages the newest checkpoints kept"},
      {"train.average_last=3 --set train.average_best=true --set train.valid_every=0",
       "train.average_best: needs validation during training"},
  };
  for (const auto& c : cases) {
    auto r = nmt_test::run_command(base + " --set " + c.set);
    EXPECT_EQ(r.status, 1) << c.set;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.set << ": " << r.output;
  }
}
