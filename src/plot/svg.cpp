#include "plot/svg.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "util/util.h"

namespace nmt::svg {
namespace {

// XML 1.0 Char production; anything else makes the document ill-formed, even as &#N;.
bool is_xml_char(char32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

bool is_wide(char32_t c) {
  return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) ||
         (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
         (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1FAFF) ||
         (c >= 0x20000 && c <= 0x3FFFD);
}

template <class... Format>
std::string to_text(double v, Format... format) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::array<char, 40> buf{};
  // to_chars ignores the C locale, so a decimal comma can never appear.
  auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v, format...);
  return std::string(buf.data(), res.ptr);
}

}  // namespace

std::u32string label(const std::string& utf8) {
  std::u32string cps = decode_utf8(utf8);
  cps.erase(std::remove_if(cps.begin(), cps.end(), [](char32_t c) { return !is_xml_char(c); }),
            cps.end());
  return cps;
}

std::string escape(const std::u32string& cps) {
  std::string out;
  out.reserve(cps.size() + 8);
  for (char32_t c : cps) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      // Attribute-value normalisation would turn these into spaces; keep them as written.
      case '\t':
        out += "&#9;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        if (is_xml_char(c)) append_utf8(out, c);
    }
  }
  return out;
}

std::string escape(const std::string& utf8) { return escape(decode_utf8(utf8)); }

double text_width(const std::u32string& cps, double font_px) {
  double em = 0;
  for (char32_t c : cps) em += is_wide(c) ? 1.15 : 0.64;
  return em * font_px;
}

double text_width(const std::string& utf8, double font_px) {
  return text_width(decode_utf8(utf8), font_px);
}

std::string number(double v, int digits) { return to_text(v, std::chars_format::general, digits); }

std::string exact(double v) { return to_text(v); }

std::string px(double v) { return to_text(std::round(v * 100) / 100, std::chars_format::fixed, 2); }

std::string open_document(int width, int height, const std::string& desc, const std::string& title,
                          int margin) {
  const std::string w = std::to_string(width);
  const std::string h = std::to_string(height);
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
         "\" viewBox=\"0 0 " + w + " " + h + "\">\n";
  svg += "<desc>" + escape(desc) + "</desc>\n";
  svg += "<rect width=\"" + w + "\" height=\"" + h + "\" fill=\"#ffffff\"/>\n";
  if (!title.empty())
    svg += text(margin, margin + 15,
                "font-family=\"sans-serif\" font-size=\"14\" font-weight=\"bold\"", title) +
           "\n";
  return svg;
}

std::string text(double x, double y, const std::string& attrs, const std::string& utf8) {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\"" + (attrs.empty() ? "" : " " + attrs) +
         ">" + escape(utf8) + "</text>";
}

}  // namespace nmt::svg
