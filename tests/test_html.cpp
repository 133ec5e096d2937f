#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "doc/html.h"
#include "util/util.h"

using namespace nmt;

namespace {

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string w;
  for (const char c : s + " ") {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      if (!w.empty()) out.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  return out;
}

std::vector<int64_t> identity_alignment(const std::string& block) {
  std::vector<int64_t> a(words(block).size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int64_t>(i);
  return a;
}

// The document rebuilt with each block "translated" as itself, word for word.
std::string identity(const HtmlDocument& doc) {
  std::vector<std::vector<int64_t>> alignments;
  for (const auto& b : doc.blocks()) alignments.push_back(identity_alignment(b));
  return doc.restore(doc.blocks(), alignments);
}

// One block translated with one alignment.
std::string translate_one(const std::string& html, const std::string& translation,
                          const std::vector<int64_t>& alignment) {
  HtmlDocument doc(html, false);
  EXPECT_EQ(doc.blocks().size(), 1u) << html;
  return doc.restore({translation}, {alignment});
}

// Tags by name: "b" for each opening <b ...>, "/b" for each </b>, names lower-cased. A '<' that
// starts no tag name (text, "<!--", "<?") is not counted.
std::map<std::string, int> tag_counts(const std::string& html) {
  std::map<std::string, int> counts;
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  for (size_t i = 0; i + 1 < html.size(); ++i) {
    if (html[i] != '<') continue;
    const bool closing = html[i + 1] == '/';
    size_t j = i + 1 + (closing ? 1 : 0);
    if (j >= html.size() || !letter(html[j])) continue;
    std::string name;
    for (; j < html.size() && html[j] != '>' && html[j] != '/' && html[j] != '<' &&
           html[j] != ' ' && html[j] != '\t' && html[j] != '\n' && html[j] != '\r' &&
           html[j] != '\f' && html[j] != '\v';
         ++j)
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(html[j])));
    ++counts[(closing ? "/" : "") + name];
  }
  return counts;
}

std::string error_of(const std::string& html, int64_t first_line = 1) {
  try {
    HtmlDocument doc(html, false, first_line);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Html, IdentityRoundTripKeepsDocuments) {
  const std::vector<std::string> documents = {
      "<p>Hello <b>world</b>.</p>",
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>A title</title></head>\n"
      "<body>\n  <h1 class=\"x\">Head <em>line</em></h1>\n  <p>One <i>two</i> three.</p>\n"
      "  <ul><li>a<li>b</ul>\n</body></html>\n",
      "<p>Click <a href=\"x?a=1&amp;b=2\"><img src=i> here</a>, wor<b>ld</b> (<i>x</i>)</p>",
      "<div>One<br>two <!-- note --> three<wbr>four</div>",
      "<p>Run <code>x = 1</code> now.</p><script>if (a < b) {}</script><style>p>b{}</style>",
      "<table><tr><td>a</td><td>&nbsp;</td></tr></table>",
      "<b><i>a</i> b</b> <span class=\"c\" data-x='1 2'>c<sup>2</sup></span>",
      "text<b> </b>more and <x id=\"1\"/> placeholders <g id=\"2\">here</g>",
      "<?xml version=\"1.0\"?><p>pi <![CDATA[ <raw> ]]> cdata</p>",
      "<p translate=\"no\">Keep <b>this</b></p><p>but translate this</p>",
  };
  for (const auto& html : documents) {
    HtmlDocument doc(html, false);
    EXPECT_EQ(identity(doc), html) << html;
  }
}

TEST(Html, IdentityNormalisesOnlyWhitespaceInsideBlocksAndEntities) {
  HtmlDocument doc("<p>\n  <b> Hello </b>\n  big   world\n</p>  <p>Tom &amp; Jerry&#33;</p>",
                   false);
  EXPECT_EQ(doc.blocks(), (std::vector<std::string>{"Hello big world", "Tom & Jerry!"}));
  // The block keeps its outer whitespace; the space inside <b> moves out, runs become one space.
  EXPECT_EQ(identity(doc), "<p>\n  <b>Hello</b> big world\n</p>  <p>Tom &amp; Jerry!</p>");
}

TEST(Html, BoldWordFollowsItsAlignment) {
  const std::string html = "<p>Hello <b>world</b>.</p>";
  HtmlDocument doc(html, false);
  ASSERT_EQ(doc.blocks(), std::vector<std::string>{"Hello world."});  // two words
  // "Welt." ends with the untagged piece "." of "world.", which keeps its place outside <b>.
  EXPECT_EQ(doc.restore({"Hallo Welt."}, {{0, 1}}), "<p>Hallo <b>Welt</b>.</p>");
  // A word that is one piece of its source word takes that piece's tags.
  EXPECT_EQ(doc.restore({"Hallo Welt ."}, {{0, 1, 1}}), "<p>Hallo <b>Welt</b> .</p>");
  // An unaligned word takes the tags of the word before it.
  EXPECT_EQ(doc.restore({"Hallo Welt ."}, {{0, 1, -1}}), "<p>Hallo <b>Welt .</b></p>");
  EXPECT_EQ(translate_one("<p>Hello <b>world</b> .</p>", "Hallo Welt .", {0, 1, 2}),
            "<p>Hallo <b>Welt</b> .</p>");
}

TEST(Html, ReorderedWordsTakeTheirTagsAlong) {
  EXPECT_EQ(translate_one("<p>I <b>really</b> like it</p>", "I like it really", {0, 2, 3, 1}),
            "<p>I like it <b>really</b></p>");
  EXPECT_EQ(translate_one("<p>The <b>red</b> car</p>", "La voiture rouge", {0, 2, 1}),
            "<p>La voiture <b>rouge</b></p>");
  // Bold words split apart by the reordering: one <b> over the span, never two.
  EXPECT_EQ(translate_one("<p><b>a b</b> c</p>", "A C B", {0, 2, 1}), "<p><b>A C B</b></p>");
  // The first word unaligned: it takes the tags of the next one.
  EXPECT_EQ(translate_one("<p><b>Hello</b> world</p>", "Hallo schöne Welt", {-1, 0, 1}),
            "<p><b>Hallo schöne</b> Welt</p>");
}

TEST(Html, NestedTags) {
  const std::string html = "<b><i>a</i> b</b>";
  EXPECT_EQ(translate_one(html, "a b", {0, 1}), html);
  EXPECT_EQ(translate_one(html, "B A", {1, 0}), "<b>B <i>A</i></b>");
  EXPECT_EQ(translate_one(html, "A X B", {0, -1, 1}), "<b><i>A X</i> B</b>");
}

TEST(Html, ElementOfUntranslatedWordsIsKeptEmpty) {
  // Before the target word of the source word after it...
  EXPECT_EQ(translate_one("<p>Hello <b>big</b> world</p>", "Hallo Welt", {0, 2}),
            "<p>Hallo <b></b>Welt</p>");
  // ... with its descendants, or at the end when no later source word was translated.
  EXPECT_EQ(translate_one("<p>x <b><i>y</i> <u>z</u></b></p>", "X", {0}),
            "<p>X<b><i></i><u></u></b></p>");
  EXPECT_EQ(translate_one("<p><b>Hello</b> world</p>", "Hallo Welt", {-1, -1}),
            "<p>Hallo Welt<b></b></p>");
}

TEST(Html, AttributesAreCopiedByteForByte) {
  const std::string a = "<a href=\"x?a=1&amp;b=2\" title='T &quot;q&quot;' data-n=3>";
  EXPECT_EQ(translate_one("<p>See " + a + "the docs</a>.</p>", "Voir la doc.", {0, 1, 2}),
            "<p>Voir " + a + "la doc</a>.</p>");
}

TEST(Html, EntitiesAreDecodedAndTextReEscaped) {
  HtmlDocument doc("<p>Tom &amp; Jerry &lt;3 &copy; &#x263A; &#150; &bogus; &amp</p>", false);
  ASSERT_EQ(doc.blocks(),
            std::vector<std::string>{"Tom & Jerry <3 \u00A9 \u263A \u2013 &bogus; &amp"});
  EXPECT_EQ(identity(doc),
            "<p>Tom &amp; Jerry &lt;3 \u00A9 \u263A \u2013 &amp;bogus; &amp;amp</p>");
  EXPECT_EQ(doc.restore({"A<B & C>D"}, {{0, 1, 2}}), "<p>A&lt;B &amp; C&gt;D</p>");
}

TEST(Html, VoidTagsAndCommentsStayWithTheirWords) {
  const std::string html = "<p>One<br>two <img src=x> three <!-- c --> four</p>";
  HtmlDocument doc(html, false);
  ASSERT_EQ(doc.blocks(), (std::vector<std::string>{"One", "two three four"}));
  EXPECT_EQ(identity(doc), html);
  EXPECT_EQ(doc.restore({"Eins", "vier drei zwei"}, {{0}, {2, 1, 0}}),
            "<p>Eins<br><!-- c --> vier <img src=x> drei zwei</p>");
  // An atom of an untranslated word goes with the next source word that was translated.
  EXPECT_EQ(doc.restore({"Eins", "zwei vier"}, {{0}, {0, 2}}),
            "<p>Eins<br>zwei <img src=x> <!-- c --> vier</p>");
}

TEST(Html, CodeIsKeptAndNotTranslated) {
  const std::string html = "<p>Run <code>x = 1</code> now</p>";
  HtmlDocument doc(html, false);
  ASSERT_EQ(doc.blocks(), std::vector<std::string>{"Run now"});
  EXPECT_EQ(identity(doc), html);
  EXPECT_EQ(doc.restore({"Jetzt ausführen"}, {{1, 0}}),
            "<p><code>x = 1</code> Jetzt ausführen</p>");
  HtmlDocument pre("<pre>  a\n   b <b>c</b></pre><p>d</p>", false);
  EXPECT_EQ(pre.blocks(), std::vector<std::string>{"d"});
}

TEST(Html, ScriptIsKeptVerbatim) {
  const std::string html = "<script>if (a < b) {}</script><p>Hi</p><style>a<b{}</style>";
  HtmlDocument doc(html, false);
  ASSERT_EQ(doc.blocks(), std::vector<std::string>{"Hi"});
  EXPECT_EQ(doc.restore({"Salut"}, {{0}}),
            "<script>if (a < b) {}</script><p>Salut</p><style>a<b{}</style>");
}

TEST(Html, BlockTagsSeparateBlocks) {
  HtmlDocument doc(
      "<h1>Title</h1><div>One. Two.</div><ul><li>A</li><li>B</li></ul>"
      "<table><tr><td>C<td>D</table><span>E<div>F</div></span><select><option>G</select>",
      false);
  EXPECT_EQ(doc.blocks(),
            (std::vector<std::string>{"Title", "One. Two.", "A", "B", "C", "D", "E", "F", "G"}));
}

TEST(Html, MalformedInputThrowsWithLineAndColumn) {
  EXPECT_EQ(error_of("</b>"), "line 1, column 1: closing tag </b> matches no open element");
  EXPECT_EQ(error_of("Héllo </b>"), "line 1, column 7: closing tag </b> matches no open element");
  EXPECT_EQ(error_of("<b"), "line 1, column 1: unterminated tag <b");
  EXPECT_EQ(error_of("ok\n  <b>x", 5), "line 6, column 3: element <b> is never closed");
  EXPECT_EQ(error_of("a <!-- b"), "line 1, column 3: unterminated comment");
  EXPECT_EQ(error_of("<a href=\"x>y</a>"), "line 1, column 9: unterminated attribute quote");
  EXPECT_EQ(error_of("<script>x"), "line 1, column 1: unterminated <script> element");
  EXPECT_EQ(error_of("<b><i>x</b></i>"),
            "line 1, column 8: closing tag </b> while <i> from line 1, column 4 is still open");
  // End tags HTML makes optional, and a '<' that starts no tag, are fine.
  EXPECT_EQ(error_of("<ul><li>a<li>b</ul><p>c<table><tr><td>1 < 2</table>"), "");
}

TEST(Html, LenientCopiesMalformedMarkupAsText) {
  HtmlDocument alone("</b>", true);
  EXPECT_EQ(alone.blocks(), std::vector<std::string>{"</b>"});
  EXPECT_EQ(identity(alone), "&lt;/b&gt;");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"<p>a <b</p>", "<p>a &lt;b</p>"},
      {"x <b>y", "x &lt;b&gt;y"},
      {"<b><i>x</b> y</i>", "<b>&lt;i&gt;x</b> y&lt;/i&gt;"},
      {"<p>a <!-- b</p>", "<p>a &lt;!-- b</p>"},
  };
  for (const auto& [html, expected] : cases) {
    HtmlDocument doc(html, true);
    const std::string out = identity(doc);
    EXPECT_EQ(out, expected) << html;
    EXPECT_NO_THROW(HtmlDocument(out, false)) << out;  // well-formed
  }
}

TEST(Html, RestoreChecksCounts) {
  HtmlDocument doc("<p>a b</p>", false);
  EXPECT_THROW(doc.restore({}, {}), Error);
  EXPECT_THROW(doc.restore({"x y"}, {{0}}), Error);
  EXPECT_THROW(doc.restore({"x"}, {{2}}), Error);
  EXPECT_EQ(doc.restore({""}, {{}}), "<p></p>");
}

TEST(Html, TenThousandNestedTagsAreQuick) {
  const int n = 10000;
  std::string open, close;
  for (int i = 0; i < n; ++i) open += "<span>", close += "</span>";
  const auto start = std::chrono::steady_clock::now();
  const std::string html = open + "deep text" + close;
  HtmlDocument doc(html, false);
  EXPECT_EQ(doc.blocks(), std::vector<std::string>{"deep text"});
  EXPECT_TRUE(identity(doc) == html);  // EXPECT_EQ would print 140 kB
  EXPECT_TRUE(doc.restore({"tief"}, {{1}}) == open + "tief" + close);
  EXPECT_TRUE(doc.restore({"tief"}, {{-1}}) == "tief" + open + close);  // nothing aligned
  HtmlDocument empty(open + close + "<p>x</p>", false);
  EXPECT_TRUE(identity(empty) == open + close + "<p>x</p>");
  HtmlDocument unclosed(open + "x", true);
  EXPECT_EQ(unclosed.blocks().size(), 1u);
  HtmlDocument unmatched(close, true);
  EXPECT_EQ(unmatched.blocks().size(), 1u);
  std::string words_each;
  for (int i = 0; i < n; ++i) words_each += "<b>w" + std::to_string(i) + " ";
  for (int i = 0; i < n; ++i) words_each += "</b>";
  HtmlDocument each(words_each, false);
  EXPECT_EQ(identity(each).size(), words_each.size() - 1);  // the space before </b> goes
  EXPECT_THROW(HtmlDocument(open, false), Error);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
}

namespace {

// A fuzz input: tags, text, entities and broken markup at random (even n), or properly nested
// tags with text and atoms (odd n), so that about half of them parse strictly.
std::string fuzz_input(std::mt19937& rng, int n) {
  static const std::vector<std::string> kAlphabet = [] {
    std::vector<std::string> out = {
        "<b>",    "</b>",    "<i>",      "</i>",      "<p>",  "</p>",   "<div>", "</div>",
        "<br>",   "<span>",  "</span>",  "<li>",      "<ul>", "</ul>",  "<pre>", "</pre>",
        "<code>", "</code>", "<script>", "</script>", "<x/>", "<?pi?>", "</a>",  "<img src=x>"};
    const std::string more =  // separated by '|'
        "<!-- c -->|<a href=\"x?a=1&amp;b=2\">|<b class='q'>|<!DOCTYPE html>|word|the|.| |\n|  |"
        "&amp;|&lt;|&nbsp;|&bogus;|&#65;|&#0;|<|>|&|\"|'|=|<b|<!--|-->|</|\xff|\xc3|\xc3\xa9";
    for (size_t begin = 0, end = 0; end != std::string::npos; begin = end + 1) {
      end = more.find('|', begin);
      out.push_back(more.substr(begin, end == std::string::npos ? end : end - begin));
    }
    return out;
  }();
  static const std::vector<std::string> kElements = {"b",  "i",    "span", "a href=x", "p", "div",
                                                     "li", "code", "pre",  "u",        "td"};
  static const std::vector<std::string> kLeaves = {
      "word",   "the",  ".",           " ",          "\n",   "&amp;",
      "&nbsp;", "<br>", "<img src=x>", "<!-- c -->", "<x/>", "<script>a<b</script>",
      "a < b",  "\xff", "\xc3\xa9"};
  std::string html;
  std::vector<std::string> open;
  const auto close = [&] {
    html += "</" + open.back().substr(0, open.back().find(' ')) + ">";
    open.pop_back();
  };
  for (int k = 1 + static_cast<int>(rng() % 30); k > 0; --k) {
    if (n % 2 == 0) {
      html += kAlphabet[rng() % kAlphabet.size()];
    } else if (rng() % 3 == 0) {
      open.push_back(kElements[rng() % kElements.size()]);
      html += "<" + open.back() + ">";
    } else if (rng() % 3 == 0 && !open.empty()) {
      close();
    } else {
      html += kLeaves[rng() % kLeaves.size()];
    }
  }
  while (!open.empty()) close();
  return html;
}

// A random translation: new words and copies of source words, aligned at random or unaligned.
std::string fuzz_translation(const HtmlDocument& doc, std::mt19937& rng) {
  std::vector<std::string> translations;
  std::vector<std::vector<int64_t>> alignments;
  for (const auto& block : doc.blocks()) {
    const std::vector<std::string> source = words(block);
    std::string t;
    std::vector<int64_t> a;
    for (int j = static_cast<int>(rng() % 5); j > 0; --j) {
      const int64_t s = static_cast<int64_t>(rng() % (source.size() + 1)) - 1;
      t += (t.empty() ? "" : " ") + (s >= 0 && rng() % 2 ? source[s] : "w" + std::to_string(j));
      a.push_back(rng() % 4 ? s : -1);
    }
    translations.push_back(t);
    alignments.push_back(a);
  }
  return doc.restore(translations, alignments);
}

}  // namespace

TEST(Html, FuzzNeverCrashesAndKeepsEveryTag) {
  std::mt19937 rng(20240601);
  int parsed = 0, rejected = 0;
  for (int n = 0; n < 2000; ++n) {
    const std::string html = fuzz_input(rng, n);
    for (const bool lenient : {false, true}) {
      std::string out, translated;
      std::vector<std::string> blocks;
      try {
        HtmlDocument doc(html, lenient);
        blocks = doc.blocks();
        out = identity(doc);
        translated = fuzz_translation(doc, rng);
      } catch (const Error& e) {
        ASSERT_FALSE(lenient) << "lenient threw " << e.what() << " on " << html;
        ++rejected;
        continue;
      }
      if (!lenient) {
        ++parsed;
        EXPECT_EQ(tag_counts(out), tag_counts(html)) << html << "\n" << out;
      }
      EXPECT_EQ(tag_counts(translated), tag_counts(out)) << html << "\n" << translated;
      try {  // the outputs are well-formed, and the identity reads back as the same blocks
        EXPECT_EQ(HtmlDocument(out, false).blocks(), blocks) << html << "\n" << out;
        HtmlDocument again(translated, false);
      } catch (const Error& e) {
        ADD_FAILURE() << "output not well-formed: " << e.what() << "\n"
                      << html << "\n"
                      << out << "\n"
                      << translated;
      }
    }
  }
  EXPECT_GT(parsed, 1000);
  EXPECT_GT(rejected, 500);
}
