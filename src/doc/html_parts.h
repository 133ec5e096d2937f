// What the parts of HtmlDocument share, private to src/doc: html_parse.cpp scans the input into
// tokens and matches its elements, html.cpp builds the blocks from those tokens, and
// html_restore.cpp puts a block's tags back on its translation. A nested namespace, so that
// these short names never meet others of nmt.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nmt::html_parts {

constexpr size_t kNone = std::string_view::npos;

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
inline bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

enum class Kind { kText, kOpen, kClose, kAtom };

// A part of the input: text, a tag that opens or closes an element, or an atom (markup kept
// whole: a void tag, comment, doctype, script, or an untranslated or empty element).
struct Token {
  Kind kind = Kind::kText;
  size_t begin = 0, end = 0;  // bytes of the input; the tokens tile it
  int32_t element = -1;       // open and close tags: the element
  bool breaks = false;        // an atom that ends a block (br, hr, doctype, pre, ...)
  bool separates = false;     // an atom that stood for whitespace (`<b> </b>`)
  bool visible = false;       // text with a visible character
  std::string text;           // text, decoded
};

inline Token make_token(Kind kind, size_t begin, size_t end, int32_t element = -1) {
  Token t;
  t.kind = kind;
  t.begin = begin;
  t.end = end;
  t.element = element;
  return t;
}

struct ElementInfo {
  std::string name;
  size_t open = 0, close = kNone;  // token indices; open is kNone once it turned into text
  bool block = false, untranslated = false;
};

// The input's tokens (text not yet decoded) and its elements, matched and marked block or
// inline.
struct ScannedHtml {
  std::vector<Token> tokens;
  std::vector<ElementInfo> elements;
};

// Scans html, matches its tags and marks the inline elements that hold a block boundary as
// block elements. Malformed markup throws Error, or with lenient is escaped in html (which then
// changes) and read as text. See HtmlDocument's constructor.
ScannedHtml scan_markup(std::string& html, bool lenient, int64_t first_line);

}  // namespace nmt::html_parts
