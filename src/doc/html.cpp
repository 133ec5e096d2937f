// HtmlDocument's blocks: the scanned tokens' text decoded (character references), untranslated
// and empty inline elements made atoms, and each block's words, pieces and inline elements.
#include "doc/html.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>

#include "doc/html_parts.h"
#include "util/util.h"

namespace nmt {

namespace {

using html_parts::ElementInfo;
using html_parts::is_letter;
using html_parts::is_space;
using html_parts::Kind;
using html_parts::kNone;
using html_parts::make_token;
using html_parts::Token;

bool is_alnum(char c) { return is_letter(c) || (c >= '0' && c <= '9'); }

// HTML's Latin-1 entities, U+00A0 to U+00FF in order.
const char* const kLatin1Entities[96] = {
    "nbsp",   "iexcl",  "cent",   "pound",  "curren", "yen",    "brvbar", "sect",   "uml",
    "copy",   "ordf",   "laquo",  "not",    "shy",    "reg",    "macr",   "deg",    "plusmn",
    "sup2",   "sup3",   "acute",  "micro",  "para",   "middot", "cedil",  "sup1",   "ordm",
    "raquo",  "frac14", "frac12", "frac34", "iquest", "Agrave", "Aacute", "Acirc",  "Atilde",
    "Auml",   "Aring",  "AElig",  "Ccedil", "Egrave", "Eacute", "Ecirc",  "Euml",   "Igrave",
    "Iacute", "Icirc",  "Iuml",   "ETH",    "Ntilde", "Ograve", "Oacute", "Ocirc",  "Otilde",
    "Ouml",   "times",  "Oslash", "Ugrave", "Uacute", "Ucirc",  "Uuml",   "Yacute", "THORN",
    "szlig",  "agrave", "aacute", "acirc",  "atilde", "auml",   "aring",  "aelig",  "ccedil",
    "egrave", "eacute", "ecirc",  "euml",   "igrave", "iacute", "icirc",  "iuml",   "eth",
    "ntilde", "ograve", "oacute", "ocirc",  "otilde", "ouml",   "divide", "oslash", "ugrave",
    "uacute", "ucirc",  "uuml",   "yacute", "thorn",  "yuml"};

struct NamedEntity {
  const char* name;
  char32_t code;
};
// The other common named entities; an unknown name stays literal text.
const NamedEntity kEntities[] = {
    {"quot", 0x22},     {"amp", 0x26},      {"apos", 0x27},    {"lt", 0x3C},
    {"gt", 0x3E},       {"OElig", 0x152},   {"oelig", 0x153},  {"Scaron", 0x160},
    {"scaron", 0x161},  {"Yuml", 0x178},    {"fnof", 0x192},   {"circ", 0x2C6},
    {"tilde", 0x2DC},   {"ensp", 0x2002},   {"emsp", 0x2003},  {"thinsp", 0x2009},
    {"zwnj", 0x200C},   {"zwj", 0x200D},    {"lrm", 0x200E},   {"rlm", 0x200F},
    {"ndash", 0x2013},  {"mdash", 0x2014},  {"lsquo", 0x2018}, {"rsquo", 0x2019},
    {"sbquo", 0x201A},  {"ldquo", 0x201C},  {"rdquo", 0x201D}, {"bdquo", 0x201E},
    {"dagger", 0x2020}, {"Dagger", 0x2021}, {"bull", 0x2022},  {"hellip", 0x2026},
    {"permil", 0x2030}, {"prime", 0x2032},  {"Prime", 0x2033}, {"lsaquo", 0x2039},
    {"rsaquo", 0x203A}, {"euro", 0x20AC},   {"trade", 0x2122}, {"larr", 0x2190},
    {"uarr", 0x2191},   {"rarr", 0x2192},   {"darr", 0x2193},  {"harr", 0x2194},
    {"minus", 0x2212},  {"infin", 0x221E},  {"asymp", 0x2248}, {"ne", 0x2260},
    {"le", 0x2264},     {"ge", 0x2265}};

std::optional<char32_t> named_entity(std::string_view name) {
  static const auto* const kMap = [] {
    auto* map = new std::unordered_map<std::string_view, char32_t>();
    for (int i = 0; i < 96; ++i) (*map)[kLatin1Entities[i]] = static_cast<char32_t>(0xA0 + i);
    for (const auto& e : kEntities) (*map)[e.name] = e.code;
    return map;
  }();
  const auto it = kMap->find(name);
  if (it == kMap->end()) return std::nullopt;
  return it->second;
}

// A numeric reference's character as browsers read it: 0x80-0x9F as windows-1252 (old pages
// write "&#150;" for an en dash), and what XML forbids (NUL, controls, surrogates) as U+FFFD.
char32_t numeric_reference(uint32_t v) {
  static const char32_t kWindows1252[32] = {
      0x20AC, 0x81,   0x201A, 0x192,  0x201E, 0x2026, 0x2020, 0x2021, 0x2C6,  0x2030, 0x160,
      0x2039, 0x152,  0x8D,   0x17D,  0x8F,   0x90,   0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
      0x2013, 0x2014, 0x2DC,  0x2122, 0x161,  0x203A, 0x153,  0x9D,   0x17E,  0x178};
  if (v >= 0x80 && v <= 0x9F) return kWindows1252[v - 0x80];
  const bool control = v < 0x20 && v != '\t' && v != '\n' && v != '\r';
  if (v == 0 || control || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || v == 0xFFFE ||
      v == 0xFFFF)
    return 0xFFFD;
  return v;
}

int digit_value(char c, bool hex) {
  if (c >= '0' && c <= '9') return c - '0';
  if (hex && c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (hex && c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The character reference at s[i] == '&' ("&amp;", "&#38;", "&#x26;"), its end in *end; nothing
// when there is none (a bare '&', an unknown name, no ';').
std::optional<char32_t> reference_at(std::string_view s, size_t i, size_t* end) {
  size_t j = i + 1;
  if (j < s.size() && s[j] == '#') {
    const bool hex = ++j < s.size() && (s[j] == 'x' || s[j] == 'X');
    if (hex) ++j;
    const size_t digits = j;
    uint32_t value = 0;
    for (; j < s.size() && j - digits < 16 && digit_value(s[j], hex) >= 0; ++j)
      value = std::min<uint32_t>(value * (hex ? 16 : 10) + digit_value(s[j], hex), 0x110000);
    if (j == digits || j >= s.size() || s[j] != ';') return std::nullopt;
    *end = j + 1;
    return numeric_reference(value);
  }
  const size_t name = j;
  while (j < s.size() && j - name < 32 && is_alnum(s[j])) ++j;
  if (j == name || j >= s.size() || s[j] != ';') return std::nullopt;
  const auto code = named_entity(s.substr(name, j - name));
  if (code) *end = j + 1;
  return code;
}

// Text with its character references decoded, as valid UTF-8.
std::string decode_text(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    size_t end = 0;
    const auto code = raw[i] == '&' ? reference_at(raw, i, &end) : std::nullopt;
    if (!code) {
      out += raw[i];
      continue;
    }
    append_utf8(out, *code);
    i = end - 1;
  }
  return sanitize_utf8(out);
}

// Spaces that show nothing: a part of only these (`<td>&nbsp;</td>`) is not translated.
bool is_blank(char32_t c) {
  return c == ' ' || (c >= 0x9 && c <= 0xD) || c == 0xA0 || (c >= 0x2000 && c <= 0x200D) ||
         c == 0x202F || c == 0x205F || c == 0x2060 || c == 0x3000 || c == 0xFEFF;
}

bool is_visible(std::string_view text) {
  for (const char32_t c : decode_utf8(text))
    if (!is_blank(c)) return true;
  return false;
}

// Decodes the text, and turns each untranslated element, and each inline element without
// visible text, into one atom: they are kept byte for byte wherever they go.
std::vector<Token> collapse_atoms(std::vector<Token> tokens, std::string_view html,
                                  const std::vector<ElementInfo>& elements) {
  struct Frame {
    int32_t element;
    size_t open;  // its index in out
    bool visible = false, has_text = false;
  };
  std::vector<Token> out;
  std::vector<Frame> frames;
  for (Token& t : tokens) {
    if (t.kind == Kind::kText) {
      t.text = decode_text(html.substr(t.begin, t.end - t.begin));
      t.visible = is_visible(t.text);
      if (!frames.empty()) {
        frames.back().visible |= t.visible;
        frames.back().has_text = true;
      }
    } else if (t.kind == Kind::kOpen) {
      const ElementInfo& e = elements[t.element];
      if ((!e.block || e.untranslated) && e.close != kNone)
        frames.push_back({t.element, out.size()});
    } else if (t.kind == Kind::kClose && !frames.empty() && frames.back().element == t.element) {
      const Frame f = frames.back();
      frames.pop_back();
      const ElementInfo& e = elements[t.element];
      if (e.untranslated || !f.visible) {
        Token atom = make_token(Kind::kAtom, out[f.open].begin, t.end);
        atom.breaks = e.block;
        atom.separates = f.has_text && !e.untranslated;
        out.resize(f.open);
        out.push_back(std::move(atom));
        continue;
      }
      if (!frames.empty()) {
        frames.back().visible |= f.visible;
        frames.back().has_text |= f.has_text;
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

std::string HtmlDocument::Word::text() const {
  std::string s;
  for (const Piece& p : pieces) s += p.text;
  return s;
}

// Words, pieces and inline elements of one block, from its tokens (all but block boundaries).
class HtmlDocument::Builder {
 public:
  Block build(const std::vector<Token>& tokens, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const Token& t = tokens[i];
      if (t.kind == Kind::kText) text(t.text);
      if (t.kind == Kind::kOpen) open(t);
      if (t.kind == Kind::kClose) close(t);
      if (t.kind == Kind::kAtom) atom(t);
    }
    if (has_text_) {
      end_word();
    } else {
      block_.trailing = std::move(word_.pieces);
    }
    block_.suffix = space_;
    auto& elements = block_.elements;
    for (size_t e = elements.size(); e-- > 0;) {
      const int32_t parent = elements[e].parent;
      if (parent >= 0)
        elements[parent].last_word = std::max(elements[parent].last_word, elements[e].last_word);
    }
    return std::move(block_);
  }

 private:
  int32_t top() const { return stack_.empty() ? -1 : stack_.back(); }

  void text(const std::string& s) {
    for (const char c : s) {
      if (is_space(c)) {
        (started_ ? space_ : block_.prefix) += c;
        if (!started_) continue;
        pending_space_ = true;
        piece_open_ = false;
        if (has_text_) end_word();
        continue;
      }
      started_ = true;
      space_.clear();
      if (!piece_open_) {
        Piece p;
        p.element = top();
        p.space_before = pending_space_;
        word_.pieces.push_back(std::move(p));
        pending_space_ = false;
        piece_open_ = true;
      }
      word_.pieces.back().text += c;
      has_text_ = true;
    }
  }

  // Markup ends the block's leading whitespace, a trailing space run and the current piece.
  void markup() {
    started_ = true;
    space_.clear();
    piece_open_ = false;
  }

  void open(const Token& t) {
    markup();
    Element e;
    e.parent = top();
    e.open_begin = t.begin;
    e.open_end = t.end;
    stack_.push_back(static_cast<int32_t>(block_.elements.size()));
    block_.elements.push_back(e);
  }

  void close(const Token& t) {
    markup();
    if (stack_.empty()) throw Error("html: unbalanced inline element");  // cannot happen
    Element& e = block_.elements[stack_.back()];
    stack_.pop_back();
    e.close_begin = t.begin;
    e.close_end = t.end;
    e.subtree_end = static_cast<int32_t>(block_.elements.size());
  }

  void atom(const Token& t) {
    markup();
    if (t.separates && has_text_) end_word();
    Piece p;
    p.atom_begin = t.begin;
    p.atom_end = t.end;
    p.element = top();
    p.space_before = pending_space_;
    p.separates = t.separates;
    word_.pieces.push_back(std::move(p));
    pending_space_ = false;
  }

  void end_word() {
    const auto index = static_cast<int64_t>(block_.words.size());
    for (const Piece& p : word_.pieces)
      if (!p.is_atom() && p.element >= 0) block_.elements[p.element].last_word = index;
    block_.words.push_back(std::move(word_));
    word_ = Word();
    has_text_ = false;
  }

  Block block_;
  Word word_;          // the word being read; atoms before its text attach to it
  std::string space_;  // whitespace since the last text or markup
  std::vector<int32_t> stack_;
  bool started_ = false;   // text or markup seen (the rest is no longer the prefix)
  bool has_text_ = false;  // word_ has text
  bool piece_open_ = false;
  bool pending_space_ = false;
};

HtmlDocument::HtmlDocument(std::string_view html, bool lenient, int64_t first_line) : html_(html) {
  html_parts::ScannedHtml scanned = html_parts::scan_markup(html_, lenient, first_line);
  const std::vector<Token> tokens =
      collapse_atoms(std::move(scanned.tokens), html_, scanned.elements);
  const auto breaks = [&](const Token& t) {
    if (t.kind == Kind::kAtom) return t.breaks;
    return t.kind != Kind::kText && scanned.elements[t.element].block;
  };
  const auto verbatim = [&](size_t begin, size_t end) {
    if (!segments_.empty() && segments_.back().block < 0 && segments_.back().end == begin) {
      segments_.back().end = end;
    } else {
      segments_.push_back(Segment{begin, end, -1});
    }
  };
  for (size_t i = 0; i < tokens.size();) {
    size_t j = i;
    bool visible = false;
    for (; j < tokens.size() && !breaks(tokens[j]); ++j) visible |= tokens[j].visible;
    if (j == i) {
      verbatim(tokens[i].begin, tokens[i].end);
      ++i;
      continue;
    }
    if (!visible) {
      verbatim(tokens[i].begin, tokens[j - 1].end);
    } else {
      segments_.push_back(Segment{0, 0, static_cast<int64_t>(blocks_.size())});
      blocks_.push_back(Builder().build(tokens, i, j));
      std::string text;
      for (const Word& w : blocks_.back().words) text += (text.empty() ? "" : " ") + w.text();
      block_text_.push_back(std::move(text));
    }
    i = j;
  }
}

}  // namespace nmt
