// Scanning HTML into tokens: markup told from text, tags matched into elements, and malformed
// markup reported with its line and column, or (lenient) escaped and read as text.
#include "doc/html_parts.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "util/util.h"

namespace nmt::html_parts {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool in(const std::unordered_set<std::string_view>& set, std::string_view name) {
  return set.count(name) > 0;
}

// Elements without content or end tag.
bool is_void(std::string_view name) {
  static const std::unordered_set<std::string_view> kNames = {
      "area",   "base", "br",   "col",   "embed",  "hr",    "img", "input",
      "keygen", "link", "meta", "param", "source", "track", "wbr"};
  return in(kNames, name);
}

// Elements that end a block of text; the others (b, i, a, span, em, strong, font, sub, ... and
// unknown names, such as XML placeholders) are inline.
bool is_block(std::string_view name) {
  static const std::unordered_set<std::string_view> kNames = {
      "address", "article",  "aside",    "audio",    "blockquote", "body",    "br",       "button",
      "canvas",  "caption",  "center",   "colgroup", "dd",         "details", "dialog",   "dir",
      "div",     "dl",       "dt",       "fieldset", "figcaption", "figure",  "footer",   "form",
      "frame",   "frameset", "h1",       "h2",       "h3",         "h4",      "h5",       "h6",
      "head",    "header",   "hgroup",   "hr",       "html",       "iframe",  "legend",   "li",
      "main",    "menu",     "nav",      "noscript", "object",     "ol",      "optgroup", "option",
      "p",       "pre",      "rp",       "rt",       "section",    "select",  "summary",  "table",
      "tbody",   "td",       "template", "textarea", "tfoot",      "th",      "thead",    "title",
      "tr",      "ul",       "video"};
  return in(kNames, name);
}

// Elements whose end tag HTML makes optional: the parent's end tag or the end closes them. All
// are block elements, so an implied end never moves an inline tag.
bool has_optional_end(std::string_view name) {
  static const std::unordered_set<std::string_view> kNames = {
      "p",     "li",    "dt",       "dd",      "tr", "td", "th",   "option", "optgroup", "thead",
      "tbody", "tfoot", "colgroup", "caption", "rt", "rp", "html", "head",   "body"};
  return in(kNames, name);
}

// Elements holding code or layout rather than prose: kept, never translated. pre is one: its
// whitespace is its layout, which a translation joined by single spaces would lose.
bool is_untranslated(std::string_view name) {
  static const std::unordered_set<std::string_view> kNames = {"pre", "code", "kbd", "samp",
                                                              "var", "math", "svg"};
  return in(kNames, name);
}

// Elements whose content is raw text up to their end tag, not markup.
bool is_raw_text(std::string_view name) { return name == "script" || name == "style"; }

// "line L, column C" of html[pos], the column in code points.
std::string position(std::string_view html, size_t pos, int64_t first_line) {
  int64_t line = first_line;
  size_t line_start = 0;
  for (size_t i = 0; i < pos && i < html.size(); ++i) {
    if (html[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  const size_t column = decode_utf8(html.substr(line_start, pos - line_start)).size() + 1;
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// A piece of markup as scanned.
struct Markup {
  Kind kind = Kind::kAtom;
  std::string name;
  size_t end = 0;
  bool breaks = false, no_translate = false, self_closing = false;
};

// Splits the input into text and markup and matches the tags, in one loop without recursion.
class Scanner {
 public:
  Scanner(std::string_view html, bool lenient, int64_t first_line)
      : html_(html), lenient_(lenient), first_line_(first_line) {}
  void run();

  std::vector<Token> tokens;
  std::vector<ElementInfo> elements;
  std::vector<size_t> repairs;  // lenient: each '<' of markup read as text

 private:
  bool scan(size_t lt, Markup& m);
  bool scan_declaration(size_t lt, Markup& m);
  bool scan_start_tag(size_t lt, Markup& m);
  bool scan_attributes(size_t lt, size_t& i, Markup& m);
  bool scan_end_tag(size_t lt, Markup& m);
  void add(size_t lt, const Markup& m);
  void close(size_t lt, const Markup& m);
  void finish();
  void to_text(int32_t element);
  bool malformed(size_t pos, const std::string& what);
  size_t find(std::string_view needle, size_t from);
  size_t find_end_tag(const std::string& name, size_t from);

  std::string_view html_;
  bool lenient_;
  int64_t first_line_;
  bool failed_ = false;                                  // the last scan met malformed markup
  std::vector<int32_t> stack_;                           // the open elements
  std::unordered_map<std::string, int64_t> open_count_;  // the open elements by name
  // A needle that is not in the input from this offset on: lenient rescans of unterminated
  // comments or scripts stay linear.
  std::unordered_map<std::string, size_t> absent_from_;
};

// Throws the error unless lenient; false for "not markup" then.
bool Scanner::malformed(size_t pos, const std::string& what) {
  if (!lenient_) throw Error(position(html_, pos, first_line_) + ": " + what);
  failed_ = true;
  return false;
}

size_t Scanner::find(std::string_view needle, size_t from) {
  const std::string key(needle);
  const auto it = absent_from_.find(key);
  if (it != absent_from_.end() && from >= it->second) return kNone;
  const size_t at = html_.find(needle, from);
  if (at == kNone) absent_from_[key] = from;  // below any offset already known
  return at;
}

// Where "</name" (any case) followed by a space, '/' or '>' starts, from `from` on.
size_t Scanner::find_end_tag(const std::string& name, size_t from) {
  const std::string key = "</" + name;
  const auto absent = absent_from_.find(key);
  if (absent != absent_from_.end() && from >= absent->second) return kNone;
  for (size_t at = find("</", from); at != kNone; at = find("</", at + 2)) {
    const size_t after = at + 2 + name.size();
    if (after < html_.size() && lower(html_.substr(at + 2, name.size())) == name &&
        (is_space(html_[after]) || html_[after] == '/' || html_[after] == '>'))
      return at;
  }
  absent_from_[key] = from;
  return kNone;
}

void Scanner::run() {
  size_t pos = 0, text_begin = 0;
  for (;;) {
    const size_t lt = html_.find('<', pos);
    if (lt == kNone) break;
    pos = lt + 1;
    Markup m;
    failed_ = false;
    if (!scan(lt, m)) {  // not markup, or malformed markup read as text
      if (failed_) repairs.push_back(lt);
      continue;
    }
    if (lt > text_begin) tokens.push_back(make_token(Kind::kText, text_begin, lt));
    add(lt, m);
    pos = text_begin = m.end;
  }
  if (html_.size() > text_begin)
    tokens.push_back(make_token(Kind::kText, text_begin, html_.size()));
  finish();
}

// Markup at html_[lt] == '<', or false: a '<' that starts none ("a < b") is text, as in HTML.
bool Scanner::scan(size_t lt, Markup& m) {
  if (lt + 1 >= html_.size()) return false;
  const char c = html_[lt + 1];
  if (c == '!' || c == '?') return scan_declaration(lt, m);
  if (c == '/') return lt + 2 < html_.size() && is_letter(html_[lt + 2]) && scan_end_tag(lt, m);
  return is_letter(c) && scan_start_tag(lt, m);
}

// A comment, CDATA section, processing instruction or doctype: an atom.
bool Scanner::scan_declaration(size_t lt, Markup& m) {
  const std::string_view rest = html_.substr(lt);
  std::string_view terminator = ">", what = "declaration";
  size_t from = lt + 2;
  if (rest.compare(0, 4, "<!--") == 0) {
    terminator = "-->", what = "comment", from = lt + 4;
  } else if (rest.compare(0, 9, "<![CDATA[") == 0) {
    terminator = "]]>", what = "CDATA section", from = lt + 9;
  } else if (rest[1] == '?') {
    terminator = "?>", what = "processing instruction";
  } else {
    m.breaks = true;  // a doctype belongs to no sentence
  }
  const size_t at = find(terminator, from);
  if (at == kNone) return malformed(lt, "unterminated " + std::string(what));
  m.kind = Kind::kAtom;
  m.end = at + terminator.size();
  return true;
}

bool Scanner::scan_start_tag(size_t lt, Markup& m) {
  size_t i = lt + 1;
  while (i < html_.size() && !is_space(html_[i]) && html_[i] != '/' && html_[i] != '>' &&
         html_[i] != '<')
    ++i;
  m.name = lower(html_.substr(lt + 1, i - lt - 1));
  m.kind = Kind::kOpen;
  if (!scan_attributes(lt, i, m)) return false;
  m.end = i;
  if (is_void(m.name) || m.self_closing) {
    m.kind = Kind::kAtom;
    m.breaks = is_block(m.name);
  } else if (is_raw_text(m.name)) {
    const size_t close = find_end_tag(m.name, m.end);
    if (close == kNone) return malformed(lt, "unterminated <" + m.name + "> element");
    const size_t gt = find(">", close);
    if (gt == kNone) return malformed(close, "unterminated tag </" + m.name);
    m.kind = Kind::kAtom;
    m.end = gt + 1;
  }
  return true;
}

// The attributes after a tag name, up to and past '>' or "/>"; quoted values may hold anything.
bool Scanner::scan_attributes(size_t lt, size_t& i, Markup& m) {
  const size_t n = html_.size();
  for (;;) {
    while (i < n && is_space(html_[i])) ++i;
    if (i >= n || html_[i] == '<') return malformed(lt, "unterminated tag <" + m.name);
    if (html_[i] == '>' || html_.compare(i, 2, "/>") == 0) {
      m.self_closing = html_[i] == '/';
      i += m.self_closing ? 2 : 1;
      return true;
    }
    const size_t name_begin = i++;  // the first character may be anything, even '=' or '/'
    while (i < n && !is_space(html_[i]) && html_[i] != '=' && html_[i] != '>' && html_[i] != '/' &&
           html_[i] != '<')
      ++i;
    const std::string name = lower(html_.substr(name_begin, i - name_begin));
    while (i < n && is_space(html_[i])) ++i;
    if (i >= n || html_[i] != '=') continue;
    ++i;
    while (i < n && is_space(html_[i])) ++i;
    size_t value_begin = i, value_end = i;
    if (i < n && (html_[i] == '"' || html_[i] == '\'')) {
      const size_t quote = find(html_.substr(i, 1), i + 1);
      if (quote == kNone) return malformed(i, "unterminated attribute quote");
      value_begin = i + 1, value_end = quote, i = quote + 1;
    } else {
      while (i < n && !is_space(html_[i]) && html_[i] != '>' && html_[i] != '<') ++i;
      value_end = i;
    }
    if (name == "translate" &&
        lower(trim(html_.substr(value_begin, value_end - value_begin))) == "no")
      m.no_translate = true;
  }
}

bool Scanner::scan_end_tag(size_t lt, Markup& m) {
  size_t i = lt + 2;
  while (i < html_.size() && !is_space(html_[i]) && html_[i] != '/' && html_[i] != '>' &&
         html_[i] != '<')
    ++i;
  m.name = lower(html_.substr(lt + 2, i - lt - 2));
  m.kind = Kind::kClose;
  while (i < html_.size() && html_[i] != '>' && html_[i] != '<') ++i;
  if (i >= html_.size() || html_[i] != '>') return malformed(lt, "unterminated tag </" + m.name);
  m.end = i + 1;
  return true;
}

void Scanner::add(size_t lt, const Markup& m) {
  if (m.kind == Kind::kClose) return close(lt, m);
  if (m.kind == Kind::kAtom) {
    Token t = make_token(Kind::kAtom, lt, m.end);
    t.breaks = m.breaks;
    tokens.push_back(t);
    return;
  }
  const auto id = static_cast<int32_t>(elements.size());
  elements.push_back(ElementInfo{m.name, tokens.size(), kNone, is_block(m.name),
                                 is_untranslated(m.name) || m.no_translate});
  tokens.push_back(make_token(Kind::kOpen, lt, m.end, id));
  stack_.push_back(id);
  ++open_count_[m.name];
}

// Closes the element the tag names, and the open ones inside it whose end tag is optional.
void Scanner::close(size_t lt, const Markup& m) {
  const auto count = open_count_.find(m.name);
  if (count == open_count_.end() || count->second == 0) {
    malformed(lt, "closing tag </" + m.name + "> matches no open element");
    repairs.push_back(lt);
    tokens.push_back(make_token(Kind::kText, lt, m.end));
    return;
  }
  while (elements[stack_.back()].name != m.name) {
    const int32_t top = stack_.back();
    if (!has_optional_end(elements[top].name)) {
      if (!lenient_)  // the message costs a pass over the input
        malformed(lt, "closing tag </" + m.name + "> while <" + elements[top].name + "> from " +
                          position(html_, tokens[elements[top].open].begin, first_line_) +
                          " is still open");
      to_text(top);
    }
    --open_count_[elements[top].name];
    stack_.pop_back();
  }
  const int32_t id = stack_.back();
  stack_.pop_back();
  --count->second;
  elements[id].close = tokens.size();
  tokens.push_back(make_token(Kind::kClose, lt, m.end, id));
}

void Scanner::finish() {
  for (; !stack_.empty(); stack_.pop_back()) {
    const int32_t top = stack_.back();
    if (has_optional_end(elements[top].name)) continue;
    malformed(tokens[elements[top].open].begin,
              "element <" + elements[top].name + "> is never closed");
    to_text(top);
  }
}

// Lenient: an element that could not be closed; its opening tag is copied as text.
void Scanner::to_text(int32_t element) {
  Token& t = tokens[elements[element].open];
  repairs.push_back(t.begin);
  t.kind = Kind::kText;
  t.element = -1;
  elements[element].open = kNone;
}

// Scans html; with lenient, markup read as text gets its '<' escaped and the result is scanned
// again, so that the parts copied byte for byte (untranslated elements, the markup between
// blocks) hold no malformed markup either. One round nearly always suffices; after a few, every
// '<' is escaped.
Scanner scan_repaired(std::string& html, bool lenient, int64_t first_line) {
  for (int round = 0;; ++round) {
    Scanner scanner(html, lenient, first_line);
    scanner.run();
    if (scanner.repairs.empty()) return scanner;
    std::sort(scanner.repairs.begin(), scanner.repairs.end());
    std::string repaired;
    size_t next = 0;
    for (size_t i = 0; i < html.size(); ++i) {
      bool listed = false;
      for (; next < scanner.repairs.size() && scanner.repairs[next] == i; ++next) listed = true;
      if (html[i] == '<' && (listed || round >= 4)) {
        repaired += "&lt;";
      } else {
        repaired += html[i];
      }
    }
    html = std::move(repaired);
  }
}

// An inline element around a block boundary (`<a><div>..</div></a>`) becomes a block element:
// its tags stay where they are. Each element is marked once, so this is linear.
void mark_block_elements(const std::vector<Token>& tokens, std::vector<ElementInfo>& elements) {
  std::vector<int32_t> open;  // open inline elements; the first `marked` of them are marked
  size_t marked = 0;
  for (const Token& t : tokens) {
    bool breaks = t.kind == Kind::kAtom && t.breaks;
    if (t.kind == Kind::kOpen || t.kind == Kind::kClose) {
      ElementInfo& e = elements[t.element];
      if (t.kind == Kind::kOpen && !e.block) {
        open.push_back(t.element);
        continue;
      }
      if (t.kind == Kind::kClose && !open.empty() && open.back() == t.element) {
        open.pop_back();
        marked = std::min(marked, open.size());
        continue;
      }
      breaks = e.block;
    }
    if (!breaks) continue;
    for (size_t k = marked; k < open.size(); ++k) elements[open[k]].block = true;
    marked = open.size();
  }
}

}  // namespace

ScannedHtml scan_markup(std::string& html, bool lenient, int64_t first_line) {
  Scanner scanner = scan_repaired(html, lenient, first_line);
  mark_block_elements(scanner.tokens, scanner.elements);
  return ScannedHtml{std::move(scanner.tokens), std::move(scanner.elements)};
}

}  // namespace nmt::html_parts
