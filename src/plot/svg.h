// SVG building blocks shared by the attention heatmaps (plot/attention.h) and the training
// curves (train/curves.h): XML-safe text, width estimates, locale-free numbers and the document
// frame. Pure string building.
#pragma once

#include <string>

namespace nmt::svg {

// UTF-8 decoded (invalid bytes -> U+FFFD) with the characters XML 1.0 forbids dropped.
std::u32string label(const std::string& utf8);

// Escaped for both text and attribute values (quotes too; tab and newlines as references).
std::string escape(const std::u32string& cps);
std::string escape(const std::string& utf8);

// Estimated rendered width in pixels. Deliberately generous (fallback fonts, the ▁ glyph) because
// an over-wide canvas only costs whitespace while an under-wide one clips text.
double text_width(const std::u32string& cps, double font_px);
double text_width(const std::string& utf8, double font_px);

// `digits` significant digits, never a decimal comma; "NaN", "inf", "-inf".
std::string number(double v, int digits);
// The shortest text that reads back as exactly `v` (for data attributes tests compare).
std::string exact(double v);
// A pixel coordinate with two decimals.
std::string px(double v);

// XML declaration, the <svg> root of width x height, a <desc>, a white background and a bold
// title at the top left (none when empty). Close with "</svg>\n".
std::string open_document(int width, int height, const std::string& desc, const std::string& title,
                          int margin);

// <text x y attrs>escaped</text>
std::string text(double x, double y, const std::string& attrs, const std::string& utf8);

}  // namespace nmt::svg
