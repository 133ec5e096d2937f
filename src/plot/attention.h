// Renders one sentence's cross-attention matrix as a standalone SVG heatmap or as JSON.
// Pure string building: no LibTorch, so it can be tested and reused without a model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

struct AttentionMap {
  int64_t sentence = 0;             // 1-based input line number
  int64_t layer = 0;                // 0-based decoder layer
  int64_t head = -1;                // 0-based head; -1: mean over heads
  int64_t num_heads = 0;            // heads averaged when head == -1 (title only); 0: unknown
  std::vector<std::string> source;  // column labels (source pieces), arbitrary bytes
  std::vector<std::string> target;  // row labels (target pieces), arbitrary bytes
  std::vector<std::vector<float>> weights;  // [target][source], nominally in 0..1
};

struct AttentionSvgOptions {
  int cell_px = 22;                // side of one heatmap cell
  bool cell_tooltips = true;       // a <title> with the weight per cell; off for huge matrices
  std::size_t max_label_cps = 24;  // longer labels are cut and end in "…", full text in a <title>
};

// Standalone SVG document (XML declaration, one <svg> root). Rows are target pieces, columns
// source pieces. Labels are sanitised (invalid UTF-8 -> U+FFFD, XML-forbidden control
// characters dropped) and escaped. Weights are clamped to 0..1 for colour only; NaN cells are
// grey; tooltips show the stored value. An empty matrix gives a valid document with a note.
// Throws std::invalid_argument when the weights' shape does not match the labels.
std::string attention_svg(const AttentionMap& map, const AttentionSvgOptions& options = {});

// JSON document {"sentence", "layer", "head" (null = mean), "source", "target", "weights"}
// with weights as rows of target pieces, rounded to 6 significant digits; NaN/inf become null.
// Invalid UTF-8 in labels becomes U+FFFD. Throws std::invalid_argument on a shape mismatch.
std::string attention_json(const AttentionMap& map);

// "#rrggbb" fill for a weight: white at <= 0 to dark blue at >= 1, grey for NaN.
std::string attention_fill(float weight);

}  // namespace nmt
