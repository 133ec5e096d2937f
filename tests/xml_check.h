// Test helper: a strict XML 1.0 well-formedness checker that builds a tree, shared by the tests
// of every SVG nmt writes (attention heatmaps, training curves).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// A small, strict XML 1.0 well-formedness checker (no DTDs) that also builds a tree, so tests
// can look at elements and unescaped text. Written independently of the module's own escaping.

struct XmlNode {
  std::string name;
  std::map<std::string, std::string> attrs;  // unescaped values
  std::vector<XmlNode> children;
  std::string text;  // direct character data, unescaped
};

bool is_xml_char(uint32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

void put_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Empty when every byte sequence is valid UTF-8 and every code point is an XML Char.
std::string check_chars(const std::string& s, bool xml = true) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    uint32_t c = 0;
    size_t len = 1;
    if (b < 0x80) {
      c = b;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, c = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, c = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, c = b & 0x07;
    } else {
      return "invalid UTF-8 lead byte at " + std::to_string(i);
    }
    if (i + len > s.size()) return "truncated UTF-8 at " + std::to_string(i);
    for (size_t k = 1; k < len; ++k) {
      const unsigned char cb = static_cast<unsigned char>(s[i + k]);
      if ((cb & 0xC0) != 0x80) return "bad UTF-8 continuation at " + std::to_string(i + k);
      c = (c << 6) | (cb & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kMin[len]) return "overlong UTF-8 at " + std::to_string(i);
    if (c >= 0xD800 && c <= 0xDFFF) return "UTF-16 surrogate at " + std::to_string(i);
    if (c > 0x10FFFF) return "code point above U+10FFFF at " + std::to_string(i);
    if (xml && !is_xml_char(c)) return "character not allowed in XML at byte " + std::to_string(i);
    i += len;
  }
  return "";
}

class XmlChecker {
 public:
  explicit XmlChecker(const std::string& doc) : s_(doc) {}

  // Empty on success; otherwise what is wrong and where.
  std::string parse(XmlNode* root) {
    if (std::string e = check_chars(s_); !e.empty()) return e;
    try {
      if (s_.compare(0, 5, "<?xml") == 0) {
        const size_t end = s_.find("?>");
        if (end == std::string::npos) fail("unterminated XML declaration");
        if (s_.substr(0, end).find("version=\"1.0\"") == std::string::npos) {
          fail("XML declaration without version=\"1.0\"");
        }
        pos_ = end + 2;
      }
      misc();
      if (!at("<") || at("</") || at("<!") || at("<?")) fail("expected the root element");
      element(root, 0);
      misc();
      if (pos_ != s_.size()) fail("content after the root element");
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + " at byte " + std::to_string(pos_) + ": \"" +
                             s_.substr(pos_, 40) + "\"");
  }
  bool at(const char* lit) const { return s_.compare(pos_, std::strlen(lit), lit) == 0; }
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  bool skip_space() {
    const size_t start = pos_;
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
    return pos_ > start;
  }
  static bool name_start(unsigned char c) {
    return std::isalpha(c) || c == '_' || c == ':' || c >= 0x80;
  }
  static bool name_char(unsigned char c) {
    return name_start(c) || std::isdigit(c) || c == '-' || c == '.';
  }
  std::string name() {
    if (pos_ >= s_.size() || !name_start(static_cast<unsigned char>(s_[pos_]))) {
      fail("expected a name");
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && name_char(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    return s_.substr(start, pos_ - start);
  }
  void expect(const char* lit) {
    if (!at(lit)) fail(std::string("expected '") + lit + "'");
    pos_ += std::strlen(lit);
  }
  void comment() {
    expect("<!--");
    const size_t end = s_.find("--", pos_);
    if (end == std::string::npos) fail("unterminated comment");
    pos_ = end;
    expect("-->");  // "--" inside a comment is not allowed
  }
  void pi() {
    expect("<?");
    std::string target = name();
    for (char& c : target) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (target == "xml") fail("XML declaration not at the start");
    const size_t end = s_.find("?>", pos_);
    if (end == std::string::npos) fail("unterminated processing instruction");
    pos_ = end + 2;
  }
  void misc() {
    for (;;) {
      skip_space();
      if (at("<!--")) {
        comment();
      } else if (at("<?")) {
        pi();
      } else {
        return;
      }
    }
  }
  // After '&': a predefined entity or a character reference to an XML Char.
  void reference(std::string& out) {
    expect("&");
    const size_t semi = s_.find(';', pos_);
    if (semi == std::string::npos || semi - pos_ > 12) fail("unterminated reference");
    const std::string body = s_.substr(pos_, semi - pos_);
    static const std::map<std::string, char> kNamed = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    if (auto it = kNamed.find(body); it != kNamed.end()) {
      out += it->second;
    } else if (body.size() >= 2 && body[0] == '#') {
      const bool hex = body[1] == 'x';
      const std::string digits = body.substr(hex ? 2 : 1);
      if (digits.empty()) fail("empty character reference");
      uint32_t c = 0;
      for (char d : digits) {
        const bool ok = hex ? std::isxdigit(static_cast<unsigned char>(d)) != 0
                            : std::isdigit(static_cast<unsigned char>(d)) != 0;
        if (!ok) fail("bad character reference");
        const int digit =
            std::isdigit(static_cast<unsigned char>(d)) ? d - '0' : std::tolower(d) - 'a' + 10;
        c = c * (hex ? 16 : 10) + static_cast<uint32_t>(digit);
        if (c > 0x10FFFF) fail("character reference out of range");
      }
      if (!is_xml_char(c)) fail("character reference to a forbidden character");
      put_utf8(out, c);
    } else {
      fail("unknown entity '" + body + "'");
    }
    pos_ = semi + 1;
  }
  void element(XmlNode* node, int depth) {
    if (depth > 200) fail("nesting too deep");
    expect("<");
    node->name = name();
    for (;;) {
      const bool spaced = skip_space();
      if (at("/>")) {
        pos_ += 2;
        return;
      }
      if (at(">")) {
        ++pos_;
        break;
      }
      if (!spaced) fail("attributes must be separated by whitespace");
      const std::string attr = name();
      skip_space();
      expect("=");
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) {
        fail("attribute value not quoted");
      }
      const char quote = s_[pos_++];
      std::string value;
      while (pos_ < s_.size() && s_[pos_] != quote) {
        if (s_[pos_] == '<') fail("raw '<' in an attribute value");
        if (s_[pos_] == '&') {
          reference(value);
        } else {
          value += s_[pos_++];
        }
      }
      expect(std::string(1, quote).c_str());
      if (!node->attrs.emplace(attr, value).second) fail("duplicate attribute '" + attr + "'");
    }
    // Content up to the matching end tag.
    for (;;) {
      if (pos_ >= s_.size()) fail("missing </" + node->name + ">");
      if (at("</")) {
        pos_ += 2;
        const std::string closing = name();
        if (closing != node->name) fail("</" + closing + "> closes <" + node->name + ">");
        skip_space();
        expect(">");
        return;
      }
      if (at("<!--")) {
        comment();
      } else if (at("<![CDATA[")) {
        pos_ += 9;
        const size_t end = s_.find("]]>", pos_);
        if (end == std::string::npos) fail("unterminated CDATA");
        node->text += s_.substr(pos_, end - pos_);
        pos_ = end + 3;
      } else if (at("<!")) {
        fail("unexpected markup declaration");
      } else if (at("<?")) {
        pi();
      } else if (at("<")) {
        node->children.emplace_back();
        element(&node->children.back(), depth + 1);
      } else if (at("&")) {
        reference(node->text);
      } else if (at("]]>")) {
        fail("']]>' in character data");
      } else {
        node->text += s_[pos_++];
      }
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
};

std::string check_xml(const std::string& doc, XmlNode* root = nullptr) {
  XmlNode scratch;
  return XmlChecker(doc).parse(root ? root : &scratch);
}

// Parses an SVG from attention_svg and asserts the document-level requirements.
XmlNode parse_svg(const std::string& svg) {
  XmlNode root;
  const std::string err = check_xml(svg, &root);
  EXPECT_EQ(err, "") << svg.substr(0, 2000);
  EXPECT_EQ(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>", 0), 0u);
  EXPECT_EQ(root.name, "svg");
  EXPECT_EQ(root.attrs["xmlns"], "http://www.w3.org/2000/svg");
  EXPECT_EQ(root.attrs["viewBox"], "0 0 " + root.attrs["width"] + " " + root.attrs["height"]);
  EXPECT_GT(std::atoi(root.attrs["width"].c_str()), 0);
  EXPECT_GT(std::atoi(root.attrs["height"].c_str()), 0);
  return root;
}

void collect(const XmlNode& n, const std::function<bool(const XmlNode&)>& pred,
             std::vector<const XmlNode*>* out) {
  if (pred(n)) out->push_back(&n);
  for (const auto& c : n.children) collect(c, pred, out);
}

std::vector<const XmlNode*> find_all(const XmlNode& root, const std::string& name,
                                     const std::string& cls = "") {
  std::vector<const XmlNode*> out;
  collect(
      root,
      [&](const XmlNode& n) {
        if (n.name != name) return false;
        if (cls.empty()) return true;
        auto it = n.attrs.find("class");
        return it != n.attrs.end() && it->second == cls;
      },
      &out);
  return out;
}

const XmlNode* find_group(const XmlNode& root, const std::string& cls) {
  auto groups = find_all(root, "g", cls);
  return groups.empty() ? nullptr : groups[0];
}

}  // namespace
