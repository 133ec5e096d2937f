#include "plot/attention.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "plot/svg.h"
#include "util/util.h"

namespace nmt {
namespace {

std::u32string truncate_label(const std::u32string& cps, std::size_t max_cps) {
  if (cps.size() <= max_cps) return cps;
  std::u32string out = cps.substr(0, max_cps);
  out.push_back(U'\u2026');
  return out;
}

std::string format_value(float v) { return svg::number(v, 4); }

std::string head_text(const AttentionMap& map) {
  if (map.head >= 0) return "head " + std::to_string(map.head);
  if (map.num_heads > 0) return "mean of " + std::to_string(map.num_heads) + " heads";
  return "mean over heads";
}

void check_shape(const AttentionMap& map, const char* who) {
  const std::string prefix = std::string(who) + ": ";
  if (map.weights.size() != map.target.size()) {
    throw std::invalid_argument(prefix + "weights have " + std::to_string(map.weights.size()) +
                                " rows but there are " + std::to_string(map.target.size()) +
                                " target labels");
  }
  for (std::size_t i = 0; i < map.weights.size(); ++i) {
    if (map.weights[i].size() != map.source.size()) {
      throw std::invalid_argument(prefix + "weights row " + std::to_string(i) + " has " +
                                  std::to_string(map.weights[i].size()) +
                                  " columns but there are " + std::to_string(map.source.size()) +
                                  " source labels");
    }
  }
}

int ceil_px(double v) { return static_cast<int>(std::ceil(v)); }

// A label as shown on an axis: truncated text, with the full text as a hover title if cut.
std::string axis_label(const std::u32string& full, const std::u32string& shown,
                       const std::string& text_attrs) {
  std::string out;
  const bool cut = shown != full;
  if (cut) out += "<g><title>" + svg::escape(full) + "</title>";
  out += "<text " + text_attrs + ">" + svg::escape(shown) + "</text>";
  if (cut) out += "</g>";
  out += "\n";
  return out;
}

constexpr double kSin45 = 0.70711;

}  // namespace

std::string attention_fill(float weight) {
  if (std::isnan(weight)) return "#bdbdbd";
  // Sequential blue ramp (white -> navy); luminance falls monotonically along the stops.
  static constexpr std::array<std::array<int, 3>, 9> kStops{{{255, 255, 255},
                                                             {222, 235, 247},
                                                             {198, 219, 239},
                                                             {158, 202, 225},
                                                             {107, 174, 214},
                                                             {66, 146, 198},
                                                             {33, 113, 181},
                                                             {8, 81, 156},
                                                             {8, 48, 107}}};
  const double w = std::clamp(static_cast<double>(weight), 0.0, 1.0);  // inf clamps too
  const double pos = w * (kStops.size() - 1);
  const std::size_t lo = std::min(static_cast<std::size_t>(pos), kStops.size() - 2);
  const double t = pos - static_cast<double>(lo);
  static const char* kHex = "0123456789abcdef";
  std::string out = "#";
  for (int k = 0; k < 3; ++k) {
    const double c = kStops[lo][k] + (kStops[lo + 1][k] - kStops[lo][k]) * t;
    const int v = std::clamp(static_cast<int>(std::lround(c)), 0, 255);
    out.push_back(kHex[v >> 4]);
    out.push_back(kHex[v & 15]);
  }
  return out;
}

namespace {

constexpr double kFont = 12;       // axis labels, monospace
constexpr double kTitleFont = 14;  // title line, sans-serif
constexpr int kMargin = 10;
constexpr int kPad = 6;
constexpr int kTitleH = 26;
constexpr int kLegendSteps = 25;
constexpr int kLegendStepW = 5;
constexpr int kLegendW = kLegendSteps * kLegendStepW;

std::string title_of(const AttentionMap& map) {
  return "sentence " + std::to_string(map.sentence) + " \u00b7 layer " +
         std::to_string(map.layer) + " \u00b7 " + head_text(map);
}

std::string open_heatmap(const AttentionMap& map, int width, int height) {
  return svg::open_document(width, height,
                            "Cross-attention weights: rows are target pieces, columns are "
                            "source pieces, darker is higher.",
                            title_of(map), kMargin);
}

// The document for a matrix with no rows or no columns: the title and a note.
std::string empty_heatmap(const AttentionMap& map) {
  const int title_w = ceil_px(svg::text_width(decode_utf8(title_of(map)), kTitleFont));
  const std::string note = "empty attention matrix: " + std::to_string(map.target.size()) +
                           " target \u00d7 " + std::to_string(map.source.size()) + " source pieces";
  const int note_w = ceil_px(svg::text_width(decode_utf8(note), kFont));
  return open_heatmap(map, std::max(title_w, note_w) + 2 * kMargin,
                      kMargin + kTitleH + 24 + kMargin) +
         "<text class=\"note\" x=\"" + std::to_string(kMargin) + "\" y=\"" +
         std::to_string(kMargin + kTitleH + 14) +
         "\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#555555\">" + svg::escape(note) +
         "</text>\n</svg>\n";
}

// Where everything goes. Row labels sit left of the grid, right-aligned; column labels rise at
// -45 degrees from the top edge, so they need height above the grid and may overhang right.
struct Layout {
  std::vector<std::u32string> src_full, src_shown, tgt_full, tgt_shown;
  int cell = 0, grid_x = 0, grid_y = 0, grid_w = 0, grid_h = 0;
  double anchor_dx = 0.25 * kFont;  // centres the rotated glyph body on the column
  int legend_x = 0, legend_y = 0, width = 0, height = 0;
  bool any_nan = false;
};

Layout layout(const AttentionMap& map, const AttentionSvgOptions& options) {
  Layout l;
  const std::size_t max_cps = std::max<std::size_t>(options.max_label_cps, 1);
  for (const auto& s : map.source) {
    l.src_full.push_back(svg::label(s));
    l.src_shown.push_back(truncate_label(l.src_full.back(), max_cps));
  }
  for (const auto& s : map.target) {
    l.tgt_full.push_back(svg::label(s));
    l.tgt_shown.push_back(truncate_label(l.tgt_full.back(), max_cps));
  }
  double row_label_w = 0;
  for (const auto& t : l.tgt_shown) row_label_w = std::max(row_label_w, svg::text_width(t, kFont));
  double max_src_w = 0;
  for (const auto& s : l.src_shown) max_src_w = std::max(max_src_w, svg::text_width(s, kFont));

  l.cell = std::max(options.cell_px, 4);
  l.grid_x = kMargin + ceil_px(row_label_w) + kPad;
  l.grid_y = kMargin + kTitleH + ceil_px((max_src_w + kFont) * kSin45) + kPad;
  l.grid_w = l.cell * static_cast<int>(map.source.size());
  l.grid_h = l.cell * static_cast<int>(map.target.size());
  const int title_w = ceil_px(svg::text_width(decode_utf8(title_of(map)), kTitleFont));
  int right = std::max(l.grid_x + l.grid_w, kMargin + title_w);
  for (std::size_t j = 0; j < map.source.size(); ++j) {
    const double cx = l.grid_x + l.cell * (static_cast<double>(j) + 0.5) + l.anchor_dx;
    right = std::max(right, ceil_px(cx + (svg::text_width(l.src_shown[j], kFont) + kFont) * kSin45));
  }
  for (const auto& row : map.weights)
    for (float v : row) l.any_nan = l.any_nan || std::isnan(v);
  l.legend_x = l.grid_x;
  l.legend_y = l.grid_y + l.grid_h + 14;
  right = std::max(right, l.legend_x + kLegendW + (l.any_nan ? 70 : 20));
  l.width = right + kMargin;
  l.height = l.legend_y + 10 + 20 + kMargin;
  return l;
}

std::string labels_svg(const Layout& l) {
  const std::string font = "font-family=\"monospace\" font-size=\"12\"";
  std::string svg = "<g class=\"row-labels\" " + font + " text-anchor=\"end\">\n";
  for (std::size_t i = 0; i < l.tgt_full.size(); ++i) {
    const int y = l.grid_y + l.cell * static_cast<int>(i) + l.cell / 2 + 4;  // baseline near centre
    svg += axis_label(
        l.tgt_full[i], l.tgt_shown[i],
        "x=\"" + std::to_string(l.grid_x - kPad / 2) + "\" y=\"" + std::to_string(y) + "\"");
  }
  svg += "</g>\n";
  svg += "<g class=\"col-labels\" " + font + ">\n";
  for (std::size_t j = 0; j < l.src_full.size(); ++j) {
    const int x = l.grid_x + l.cell * static_cast<int>(j) + l.cell / 2 + ceil_px(l.anchor_dx);
    const std::string xs = std::to_string(x);
    const std::string ys = std::to_string(l.grid_y - 4);
    svg += axis_label(
        l.src_full[j], l.src_shown[j],
        "x=\"" + xs + "\" y=\"" + ys + "\" transform=\"rotate(-45 " + xs + " " + ys + ")\"");
  }
  return svg + "</g>\n";
}

std::string cells_svg(const AttentionMap& map, const Layout& l, bool tooltips) {
  std::string svg = "<g class=\"cells\" shape-rendering=\"crispEdges\">\n";
  const std::string cs = std::to_string(l.cell);
  for (std::size_t i = 0; i < map.target.size(); ++i) {
    const std::string y = std::to_string(l.grid_y + l.cell * static_cast<int>(i));
    // Tooltips use the shown (possibly truncated) labels to keep big plots small.
    const std::string tgt = svg::escape(l.tgt_shown[i]);
    for (std::size_t j = 0; j < map.source.size(); ++j) {
      const float v = map.weights[i][j];
      svg += "<rect class=\"cell\" x=\"" + std::to_string(l.grid_x + l.cell * static_cast<int>(j)) +
             "\" y=\"" + y + "\" width=\"" + cs + "\" height=\"" + cs + "\" fill=\"" +
             attention_fill(v) + "\"";
      if (tooltips) {
        svg += "><title>" + tgt + " \u2190 " + svg::escape(l.src_shown[j]) + ": " +
               format_value(v) + "</title></rect>\n";
      } else {
        svg += "/>\n";
      }
    }
  }
  svg += "</g>\n";
  return svg + "<rect x=\"" + std::to_string(l.grid_x) + "\" y=\"" + std::to_string(l.grid_y) +
         "\" width=\"" + std::to_string(l.grid_w) + "\" height=\"" + std::to_string(l.grid_h) +
         "\" fill=\"none\" stroke=\"#999999\" stroke-width=\"1\"/>\n";
}

// A stepped ramp 0..1 below the grid, plus a NaN swatch when NaNs occur.
std::string legend_svg(const Layout& l) {
  const int lx = l.legend_x, ly = l.legend_y;
  std::string svg = "<g class=\"legend\" font-family=\"sans-serif\" font-size=\"10\">\n";
  for (int k = 0; k < kLegendSteps; ++k) {
    const float w = static_cast<float>(k) / (kLegendSteps - 1);
    svg += "<rect x=\"" + std::to_string(lx + k * kLegendStepW) + "\" y=\"" + std::to_string(ly) +
           "\" width=\"" + std::to_string(kLegendStepW) + "\" height=\"10\" fill=\"" +
           attention_fill(w) + "\"/>\n";
  }
  svg += "<rect x=\"" + std::to_string(lx) + "\" y=\"" + std::to_string(ly) + "\" width=\"" +
         std::to_string(kLegendW) +
         "\" height=\"10\" fill=\"none\" stroke=\"#999999\" stroke-width=\"0.5\"/>\n";
  const std::string ty = std::to_string(ly + 22);
  svg += "<text x=\"" + std::to_string(lx) + "\" y=\"" + ty + "\">0</text>\n";
  svg += "<text x=\"" + std::to_string(lx + kLegendW / 2) + "\" y=\"" + ty +
         "\" text-anchor=\"middle\">0.5</text>\n";
  svg += "<text x=\"" + std::to_string(lx + kLegendW) + "\" y=\"" + ty +
         "\" text-anchor=\"end\">1</text>\n";
  if (l.any_nan) {
    const int nx = lx + kLegendW + 12;
    svg += "<rect x=\"" + std::to_string(nx) + "\" y=\"" + std::to_string(ly) +
           "\" width=\"10\" height=\"10\" fill=\"" +
           attention_fill(std::numeric_limits<float>::quiet_NaN()) + "\"/>\n";
    svg += "<text x=\"" + std::to_string(nx + 14) + "\" y=\"" + std::to_string(ly + 9) +
           "\">NaN</text>\n";
  }
  return svg + "</g>\n";
}

}  // namespace

std::string attention_svg(const AttentionMap& map, const AttentionSvgOptions& options) {
  check_shape(map, "attention_svg");
  if (map.target.empty() || map.source.empty()) return empty_heatmap(map);
  const Layout l = layout(map, options);
  return open_heatmap(map, l.width, l.height) + labels_svg(l) +
         cells_svg(map, l, options.cell_tooltips) + legend_svg(l) + "</svg>\n";
}

std::string attention_json(const AttentionMap& map) {
  check_shape(map, "attention_json");
  using nlohmann::json;
  // nlohmann throws on invalid UTF-8 when dumping; labels are re-encoded first.
  auto labels = [](const std::vector<std::string>& v) {
    json arr = json::array();
    for (const auto& s : v) {
      std::string clean;
      for (char32_t c : decode_utf8(s)) append_utf8(clean, c);
      arr.push_back(std::move(clean));
    }
    return arr.dump();
  };
  // 6 significant digits via a float->text->double trip, so the dump prints e.g. 0.1 rather
  // than the double nearest the float (0.10000000149011612).
  auto number = [](float v) -> std::string {
    if (!std::isfinite(v)) return "null";
    std::array<char, 32> buf{};
    auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::general, 6);
    double d = 0;
    std::from_chars(buf.data(), res.ptr, d);
    return json(d).dump();
  };

  // Hand-assembled so each weight row stays on one line; pieces are dumped by nlohmann.
  std::string out = "{\n";
  out += "  \"sentence\": " + std::to_string(map.sentence) + ",\n";
  out += "  \"layer\": " + std::to_string(map.layer) + ",\n";
  out += "  \"head\": " + (map.head >= 0 ? std::to_string(map.head) : std::string("null")) + ",\n";
  out += "  \"source\": " + labels(map.source) + ",\n";
  out += "  \"target\": " + labels(map.target) + ",\n";
  out += "  \"weights\": [";
  for (std::size_t i = 0; i < map.weights.size(); ++i) {
    out += i == 0 ? "\n    [" : ",\n    [";
    for (std::size_t j = 0; j < map.weights[i].size(); ++j) {
      if (j > 0) out += ", ";
      out += number(map.weights[i][j]);
    }
    out += "]";
  }
  out += map.weights.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

}  // namespace nmt
