#include "plot/curves.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "plot/svg.h"
#include "util/util.h"

namespace nmt {
namespace {

constexpr int kWidth = 960;
constexpr int kMargin = 10;
constexpr int kPlotLeft = 80;  // room for the value ticks and the axis label
constexpr int kPlotRight = 30;
constexpr int kPanelHeight = 210;
constexpr int kPanelGap = 62;  // tick labels, time axis and the next panel's title
constexpr double kFont = 11;

// Colour-blind-safe qualitative palette (Okabe-Ito), one colour per run.
const char* run_colour(size_t i) {
  static const char* kColours[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                   "#e69f00", "#56b4e9", "#000000", "#f0e442"};
  return kColours[i % (sizeof kColours / sizeof kColours[0])];
}

struct Point {
  double step, value;
};

struct Series {
  std::string id;     // data-series
  std::string label;  // legend text
  std::string dash;   // stroke-dasharray ("" = solid)
  bool markers = false;
  std::vector<std::vector<Point>> per_run;  // by run
};

struct Panel {
  std::string id, title, y_label;
  std::vector<Series> series;
  // The averaged checkpoint's validation, drawn as a diamond per run (metric and loss panels).
  std::function<double(const CurveValid&)> averaged;
};

// 1, 2 or 5 times a power of ten, so that about `count` ticks span [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int count) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / count;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double unit = raw / mag < 1.5 ? 1 : raw / mag < 3.5 ? 2 : raw / mag < 7.5 ? 5 : 10;
  const double step = unit * mag;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

// Linear map of [d0, d1] onto [p0, p1].
struct Scale {
  double d0, d1, p0, p1;
  double operator()(double d) const {
    return d1 == d0 ? (p0 + p1) / 2 : p0 + (d - d0) / (d1 - d0) * (p1 - p0);
  }
};

// Training time at `step`, interpolated between the training rows around it.
double elapsed_at(const std::vector<CurveTrain>& rows, double step) {
  if (rows.empty()) return std::numeric_limits<double>::quiet_NaN();
  double prev_step = 0, prev_t = 0;
  for (const auto& r : rows) {
    if (static_cast<double>(r.step) >= step) {
      const double span = static_cast<double>(r.step) - prev_step;
      return span <= 0 ? r.elapsed_s : prev_t + (step - prev_step) / span * (r.elapsed_s - prev_t);
    }
    prev_step = static_cast<double>(r.step);
    prev_t = r.elapsed_s;
  }
  return rows.back().elapsed_s;
}

std::string join_numbers(const std::vector<Point>& pts, bool steps) {
  std::string out;
  for (const auto& p : pts) {
    if (!out.empty()) out += ' ';
    out += svg::exact(steps ? p.step : p.value);
  }
  return out;
}

std::vector<Panel> make_panels(const std::vector<CurveRun>& runs, const std::string& metric) {
  const bool bleu = metric == "bleu";
  const std::string metric_name = bleu ? "BLEU" : "chrF2";
  auto metric_of = [bleu](const CurveValid& r) { return bleu ? r.bleu : r.chrf; };
  auto nll_of = [](const CurveValid& r) { return r.loss; };

  Panel loss{"loss", "Loss", "nats per target token", {}, nll_of};
  loss.series = {{"train_loss", "training loss (label-smoothed)", "", false, {}},
                 {"train_nll", "training NLL", "2 3", false, {}},
                 {"valid_nll", "validation NLL", "7 4", true, {}}};
  Panel score{"metric", "Validation " + metric_name, metric_name, {}, metric_of};
  score.series = {{"valid_" + metric, "validation " + metric_name, "7 4", true, {}}};
  Panel lr{"lr", "Learning rate", "learning rate", {}, nullptr};
  lr.series = {{"lr", "learning rate", "", false, {}}};

  for (const auto& run : runs) {
    std::vector<Point> tl, tn, vn, vm, rate;
    for (const auto& r : run.train) {
      tl.push_back({static_cast<double>(r.step), r.loss});
      if (r.ppl > 0) tn.push_back({static_cast<double>(r.step), std::log(r.ppl)});
      rate.push_back({static_cast<double>(r.step), r.lr});
    }
    for (const auto& r : run.valid) {
      if (!r.checkpoint.empty()) continue;  // the averaged checkpoint: a marker of its own
      vn.push_back({static_cast<double>(r.step), nll_of(r)});
      vm.push_back({static_cast<double>(r.step), metric_of(r)});
    }
    loss.series[0].per_run.push_back(std::move(tl));
    loss.series[1].per_run.push_back(std::move(tn));
    loss.series[2].per_run.push_back(std::move(vn));
    score.series[0].per_run.push_back(std::move(vm));
    lr.series[0].per_run.push_back(std::move(rate));
  }
  return {loss, score, lr};
}

// A run's legend text: its name with its steps and training time.
std::string run_label(const CurveRun& run) {
  std::string label = run.name;
  const auto& t = run.train;
  if (t.empty() && run.valid.empty()) {
    label += " (no rows yet)";
  } else if (!t.empty()) {
    label += " (" + std::to_string(t.back().step) + " steps, " +
             format_duration(t.back().elapsed_s) + ")";
  }
  return label;
}

// The legend: one entry per run (its colour), then one per line style and the averaged marker,
// flowed into rows of the plot's width. Returns the SVG; `bottom` is its last baseline.
std::string legend_svg(const std::vector<CurveRun>& runs, const std::vector<Panel>& panels,
                       double& bottom) {
  const int plot_w = kWidth - kPlotLeft - kPlotRight;
  std::string legend = "<g class=\"legend\" font-family=\"sans-serif\" font-size=\"11\">\n";
  const int title_h = 28;
  const int legend_top = kMargin + title_h;
  double lx = kPlotLeft, ly = legend_top + 12;
  auto place = [&](const std::string& label) {
    const double w = 40 + svg::text_width(label, kFont);
    if (lx > kPlotLeft && lx + w > kPlotLeft + plot_w) {
      lx = kPlotLeft;
      ly += 18;
    }
    const double x = lx;
    lx += w;
    return x;
  };
  auto line = [&](double x, const std::string& attrs) {
    return "<line x1=\"" + svg::px(x) + "\" y1=\"" + svg::px(ly - 4) + "\" x2=\"" +
           svg::px(x + 24) + "\" y2=\"" + svg::px(ly - 4) + "\" " + attrs + "/>";
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string label = run_label(runs[i]);
    const double x = place(label);
    legend += "<g class=\"legend-run\" data-run=\"" + svg::escape(runs[i].name) + "\">" +
              line(x, "stroke=\"" + std::string(run_colour(i)) + "\" stroke-width=\"3\"") +
              svg::text(x + 30, ly, "", label) + "</g>\n";
  }
  lx = kPlotLeft;
  ly += 18;
  for (const auto& p : panels) {
    for (const auto& s : p.series) {
      const double x = place(s.label);
      legend += "<g class=\"legend-style\">" +
                line(x, "stroke=\"#555555\" stroke-width=\"1.5\"" +
                            (s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"")) +
                svg::text(x + 30, ly, "", s.label) + "</g>\n";
    }
  }
  const std::string label = "averaged checkpoint";
  const double x = place(label);
  legend += "<g class=\"legend-style\"><path d=\"M " + svg::px(x + 12) + " " + svg::px(ly - 9) +
            " l 5 5 l -5 5 l -5 -5 z\" fill=\"#555555\"/>" + svg::text(x + 30, ly, "", label) +
            "</g>\n";
  legend += "</g>\n";
  bottom = ly;
  return legend;
}

// The y scale of a panel: every plotted value, with 5 % of headroom (the learning rate from 0).
Scale y_scale(const Panel& panel, const std::vector<CurveRun>& runs, double top, double bottom) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  auto cover = [&](double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  };
  for (const auto& s : panel.series)
    for (const auto& pts : s.per_run)
      for (const auto& p : pts) cover(p.value);
  if (panel.averaged)
    for (const auto& run : runs)
      for (const auto& r : run.valid)
        if (!r.checkpoint.empty()) cover(panel.averaged(r));
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (hi == lo)
    lo -= 0.5 * std::max(std::abs(lo), 1e-12), hi += 0.5 * std::max(std::abs(hi), 1e-12);
  const double pad = (hi - lo) * 0.05;
  const double y_lo = panel.id == "lr" ? std::min(0.0, lo) : lo - pad;
  return {y_lo, hi + pad, bottom, top};
}

// A panel's title, frame, grid, ticks and axis labels.
std::string axes_svg(const Panel& panel, const std::vector<CurveRun>& runs, const Scale& x_of,
                     const Scale& y_of) {
  const double top = y_of.p1, bottom = y_of.p0;
  const int plot_w = kWidth - kPlotLeft - kPlotRight;
  const bool one_run = runs.size() == 1;
  std::string out =
      svg::text(kPlotLeft, top - 8, "font-size=\"13\" font-weight=\"bold\"", panel.title) + "\n";
  out += "<rect class=\"frame\" x=\"" + svg::px(kPlotLeft) + "\" y=\"" + svg::px(top) +
         "\" width=\"" + std::to_string(plot_w) + "\" height=\"" + std::to_string(kPanelHeight) +
         "\" fill=\"none\" stroke=\"#333333\"/>\n";
  out += "<g class=\"x-axis\">";
  for (double t : nice_ticks(x_of.d0, x_of.d1, 8)) {
    const double x = x_of(t);
    out += "<line x1=\"" + svg::px(x) + "\" y1=\"" + svg::px(top) + "\" x2=\"" + svg::px(x) +
           "\" y2=\"" + svg::px(bottom + 4) + "\" stroke=\"#e0e0e0\"/>";
    out += svg::text(x, bottom + 15, "text-anchor=\"middle\"", svg::number(t, 6));
    if (one_run && !runs[0].train.empty()) {
      const double secs = elapsed_at(runs[0].train, t);
      out += svg::text(x, bottom + 28, "text-anchor=\"middle\" fill=\"#777777\"",
                       format_duration(secs));
    }
  }
  out += svg::text(kPlotLeft + plot_w, bottom + 42, "text-anchor=\"end\"",
                   one_run ? "step (grey: training time H:MM:SS)" : "step");
  out += "</g>\n<g class=\"y-axis\">";
  for (double t : nice_ticks(y_of.d0, y_of.d1, 5)) {
    const double y = y_of(t);
    out += "<line x1=\"" + svg::px(kPlotLeft - 4) + "\" y1=\"" + svg::px(y) + "\" x2=\"" +
           svg::px(kPlotLeft + plot_w) + "\" y2=\"" + svg::px(y) + "\" stroke=\"#e0e0e0\"/>";
    out += svg::text(kPlotLeft - 7, y + 4, "text-anchor=\"end\"", svg::number(t, 4));
  }
  const double mid = (top + bottom) / 2;
  out += "<text x=\"18\" y=\"" + svg::px(mid) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " + svg::px(mid) + ")\">" +
         svg::escape(panel.y_label) + "</text>";
  out += "</g>\n";
  return out;
}

// One run's line of a series, with its data attributes and (validation) hover markers.
std::string series_svg(const Series& s, const CurveRun& run, size_t ri, const Scale& x_of,
                       const Scale& y_of) {
  const auto& pts = s.per_run[ri];
  std::string out = "<g class=\"series\" data-run=\"" + svg::escape(run.name) +
                    "\" data-series=\"" + s.id + "\" data-steps=\"" + join_numbers(pts, true) +
                    "\" data-values=\"" + join_numbers(pts, false) + "\">";
  std::string points;
  for (const auto& p : pts) {
    if (!points.empty()) points += ' ';
    points += svg::px(x_of(p.step)) + "," + svg::px(y_of(p.value));
  }
  out += "<polyline points=\"" + points + "\" fill=\"none\" stroke=\"" + run_colour(ri) +
         "\" stroke-width=\"1.5\"" +
         (s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"") + "/>";
  if (s.markers) {
    for (const auto& p : pts) {
      const double secs = elapsed_at(run.train, p.step);
      out += "<circle cx=\"" + svg::px(x_of(p.step)) + "\" cy=\"" + svg::px(y_of(p.value)) +
             "\" r=\"2.5\" fill=\"" + run_colour(ri) + "\"><title>" +
             svg::escape(run.name + ": step " + svg::number(p.step, 10) +
                         (std::isfinite(secs) ? " (" + format_duration(secs) + ")" : "") + ", " +
                         s.label + " " + svg::number(p.value, 5)) +
             "</title></circle>";
    }
  }
  return out + "</g>\n";
}

// The averaged checkpoints' validations of one run: a diamond each.
std::string averaged_svg(const Panel& panel, const CurveRun& run, size_t ri, const Scale& x_of,
                         const Scale& y_of) {
  std::string out;
  for (const auto& r : run.valid) {
    if (r.checkpoint.empty()) continue;
    const double v = panel.averaged(r);
    const double x = x_of(double(r.step)), y = y_of(v);
    out += "<g class=\"averaged\" data-run=\"" + svg::escape(run.name) + "\" data-step=\"" +
           std::to_string(r.step) + "\" data-value=\"" + svg::exact(v) + "\"><path d=\"M " +
           svg::px(x) + " " + svg::px(y - 5) + " l 5 5 l -5 5 l -5 -5 z\" fill=\"" +
           run_colour(ri) + "\"/><title>" +
           svg::escape(run.name + ": " + r.checkpoint + " checkpoint, " + svg::number(v, 5)) +
           "</title></g>\n";
  }
  return out;
}

std::string panel_svg(const Panel& panel, const std::vector<CurveRun>& runs, const Scale& x_of,
                      double top) {
  const Scale y_of = y_scale(panel, runs, top, top + kPanelHeight);
  const std::string font = "font-family=\"sans-serif\" font-size=\"11\"";
  std::string out = "<g class=\"panel\" data-panel=\"" + panel.id + "\" data-x=\"" +
                    svg::px(x_of.p0) + " " + svg::px(x_of.p1) + " " + svg::exact(x_of.d0) + " " +
                    svg::exact(x_of.d1) + "\" data-y=\"" + svg::px(y_of.p0) + " " +
                    svg::px(y_of.p1) + " " + svg::exact(y_of.d0) + " " + svg::exact(y_of.d1) +
                    "\" " + font + ">\n";
  out += axes_svg(panel, runs, x_of, y_of);
  for (const auto& s : panel.series)
    for (size_t ri = 0; ri < runs.size(); ++ri) out += series_svg(s, runs[ri], ri, x_of, y_of);
  if (panel.averaged)
    for (size_t ri = 0; ri < runs.size(); ++ri) out += averaged_svg(panel, runs[ri], ri, x_of, y_of);
  return out + "</g>\n";
}

}  // namespace

std::string curves_svg(const std::vector<CurveRun>& runs, const std::string& title) {
  const std::string metric = runs.empty() ? "bleu" : runs.front().metric;
  for (const auto& r : runs)
    if (r.metric != metric || (metric != "bleu" && metric != "chrf"))
      throw Error("curves: the validation metric must be bleu or chrf, the same for every run");
  const auto panels = make_panels(runs, metric);

  // The x range: step 0 to the last step any run reached.
  double max_step = 1;
  for (const auto& run : runs) {
    for (const auto& r : run.train) max_step = std::max(max_step, double(r.step));
    for (const auto& r : run.valid) max_step = std::max(max_step, double(r.step));
  }
  double legend_bottom = 0;
  const std::string legend = legend_svg(runs, panels, legend_bottom);
  const int panels_top = static_cast<int>(legend_bottom) + 40;
  const int height = panels_top + 3 * kPanelHeight + 3 * kPanelGap + kMargin;

  std::string out =
      svg::open_document(kWidth, height,
                         "Training curves from metrics.jsonl: losses, validation " + metric +
                             " and learning rate against the optimizer step.",
                         title, kMargin);
  out += legend;
  const Scale x_of{0, max_step, double(kPlotLeft), double(kWidth - kPlotRight)};
  for (size_t pi = 0; pi < panels.size(); ++pi)
    out += panel_svg(panels[pi], runs, x_of, panels_top + pi * (kPanelHeight + kPanelGap));
  out += "</svg>\n";
  return out;
}

}  // namespace nmt
