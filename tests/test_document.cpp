// Documents (`translate --format text`): paragraphs split into sentences, translated in one
// search, and rebuilt with their own spacing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "doc/document.h"
#include "helpers.h"
#include "quickstart_run.h"
#include "util/util.h"

using namespace nmt;
using nmt_test::QuickstartRun;
using nmt_test::read_lines_of;
using nmt_test::run_command;
using nmt_test::write_text;

TEST(Document, RebuildKeepsTheSourceSpacing) {
  const std::string p = "  A b.  C d!\tE. ";
  const std::vector<SentenceSpan> spans = {{2, 6}, {8, 12}, {13, 15}};
  EXPECT_EQ(rebuild_paragraph(p, spans, {"x", "yy", "z"}), "  x  yy\tz ");
  EXPECT_EQ(rebuild_paragraph("   ", {}, {}), "   ");
  EXPECT_EQ(rebuild_paragraph("", {}, {}), "");
}

// A sentence too long for the model is cut at spaces into pieces that fit, never truncated:
// the pieces cover every word in order, with only spacing between them.
TEST_F(QuickstartRun, LongSentencesAreCutIntoPiecesThatFit) {
  const LoadedModel m = load_model(run());
  const SentenceSplitter splitter("en");
  std::string text = "Intro. Then ";
  for (int i = 0; i < 40; ++i) text += "seven thousand three hundred twelve ";
  text += "end. Last one.";
  const int64_t max_ids = 12;
  const auto spans = translation_spans(splitter, m.vocabs.src, text, max_ids);
  ASSERT_GT(spans.size(), 5u);
  size_t at = 0;
  for (const auto& s : spans) {
    ASSERT_LE(at, s.begin);
    EXPECT_TRUE(trim(text.substr(at, s.begin - at)).empty());
    const std::string piece = text.substr(s.begin, s.end - s.begin);
    EXPECT_LE(static_cast<int64_t>(m.vocabs.src.encode(piece).size()), max_ids) << piece;
    at = s.end;
  }
  EXPECT_TRUE(trim(text.substr(at)).empty());
  EXPECT_EQ(text.substr(spans.front().begin, spans.front().end - spans.front().begin), "Intro.");
  EXPECT_EQ(text.substr(spans.back().begin), "Last one.");
}

namespace {

// The quickstart's test sentences as sentences of prose: capitalised, with a final period.
std::vector<std::string> prose_sentences(const std::string& file, size_t n) {
  std::vector<std::string> out;
  for (auto line : read_lines_of(file)) {
    if (out.size() == n) break;
    line[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(line[0])));
    out.push_back(line + ".");
  }
  return out;
}

}  // namespace

// --format text gives, per input line, the sentences' translations as `lines` gives them, with
// the line's own spacing; blank lines stay; --wrapped joins a paragraph's lines; --scores and
// --alignment report per sentence.
TEST_F(QuickstartRun, TextFormatTranslatesEachSentenceAndKeepsTheSpacing) {
  const auto sentences = prose_sentences(data() + "/test.en", 24);
  std::string one_a_line;
  for (const auto& s : sentences) one_a_line += s + "\n";
  write_text(path("sentences.txt"), one_a_line);
  auto r = run_command(translate("--beam 3 --precision fp32 --input " + path("sentences.txt") +
                                 " --output " + path("lines.out")));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto lines = read_lines_of(path("lines.out"));
  ASSERT_EQ(lines.size(), sentences.size());
  // Paragraphs of 1 to 4 sentences with assorted spacing, a blank and a spaces-only line.
  const std::vector<std::string> gaps = {" ", "  ", "\t", " "};
  std::string input, expected, wrapped, expected_wrapped;
  std::vector<size_t> counts;
  for (size_t i = 0, p = 0; i < sentences.size(); ++p) {
    const size_t n = std::min<size_t>(1 + p % 4, sentences.size() - i);
    std::string para = p % 3 == 0 ? " " : "", out = para, wrap, out_wrapped;
    for (size_t k = 0; k < n; ++k, ++i) {
      const std::string gap = k == 0 ? "" : gaps[(p + k) % gaps.size()];
      para += gap + sentences[i];
      out += gap + lines[i];
      wrap += sentences[i] + "\n";
      out_wrapped += (k == 0 ? "" : " ") + lines[i];
    }
    input += para + "\n" + (p == 1 ? "\n   \n" : "");
    expected += out + "\n" + (p == 1 ? "\n   \n" : "");
    wrapped += wrap + "\n";
    expected_wrapped += out_wrapped + "\n\n";
    counts.push_back(n);
  }
  write_text(path("paragraphs.txt"), input);
  r = run_command(translate("--beam 3 --precision fp32 --format text --input " +
                            path("paragraphs.txt") + " --output " + path("text.out")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nmt_test::read_text(path("text.out")), expected);
  write_text(path("wrapped.txt"), wrapped);
  r = run_command(translate("--beam 3 --precision fp32 --format text --wrapped --input " +
                            path("wrapped.txt") + " --output " + path("wrapped.out")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nmt_test::read_text(path("wrapped.out")), expected_wrapped);
  r = run_command(
      translate("--beam 3 --precision fp32 --format text --scores --alignment --input " +
                path("wrapped.txt") + " --wrapped --output " + path("scores.out")));
  ASSERT_EQ(r.status, 0) << r.output;
  size_t p = 0;
  for (const auto& line : read_lines_of(path("scores.out"))) {
    if (line.empty()) continue;
    ASSERT_LT(p, counts.size());
    const auto tab = line.rfind('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    EXPECT_EQ(split(line.substr(tab + 1), ' ').size(), counts[p]) << line;
    const auto bar = line.find(" ||| ");
    ASSERT_NE(bar, std::string::npos) << line;
    EXPECT_NE(line.find(std::to_string(counts[p] - 1) + ":", bar), std::string::npos) << line;
    ++p;
  }
  EXPECT_EQ(p, counts.size());
  r = run_command(translate("--format text --nbest 2 --beam 2 --input " + path("wrapped.txt")));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--nbest needs --format lines"), std::string::npos) << r.output;
}

namespace {

// How many times `needle` occurs in `text`.
size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

// --format html: tags come back around the translation, none lost or invented, one output line
// per input line; the text is what --format text gives the same words; malformed markup stops
// the job naming its line and column, or with --html-lenient goes through as text.
TEST_F(QuickstartRun, HtmlFormatCarriesTheTagsAcross) {
  const auto sentences = prose_sentences(data() + "/test.en", 6);
  std::string html;
  for (size_t i = 0; i + 1 < sentences.size(); i += 2)
    html += "<p class=\"x\">" + sentences[i] + " <b>" + sentences[i + 1] +
            "</b><br></p><!-- note -->\n";
  html += "<div>Before <code>x &lt; y</code> after &amp; more.</div>\n\n";
  write_text(path("in.html"), html);
  auto r = run_command(translate("--beam 3 --precision fp32 --format html --input " +
                                 path("in.html") + " --output " + path("out.html")));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto in_lines = read_lines_of(path("in.html"));
  const auto out_lines = read_lines_of(path("out.html"));
  ASSERT_EQ(out_lines.size(), in_lines.size());
  for (size_t i = 0; i < in_lines.size(); ++i)
    for (const std::string tag : {"<p class=\"x\">", "</p>", "<b>", "</b>", "<br>", "<!-- note -->",
                                  "<div>", "</div>", "<code>x &lt; y</code>"})
      EXPECT_EQ(count_of(out_lines[i], tag), count_of(in_lines[i], tag))
          << tag << " in " << out_lines[i];
  EXPECT_EQ(out_lines.back(), "");
  write_text(path("bad.html"), "<p>Fine.</p>\n<p>Not <b>fine.</p>\n");
  r = run_command(translate("--format html --input " + path("bad.html")));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("line 2, column"), std::string::npos) << r.output;
  r = run_command(translate("--format html --html-lenient --input " + path("bad.html")));
  EXPECT_EQ(r.status, 0) << r.output;
}

// Bad input to documents (binary junk, invalid UTF-8, a 1 MB line, 10,000 nested tags, open
// tags never closed): a translation with one output line per input line, or a clear error with
// exit 1; never a crash or a hang.
TEST_F(QuickstartRun, DocumentsTakeBadInputWithoutCrashing) {
  std::string junk;
  uint32_t x = 12345;
  for (int i = 0; i < 4096; ++i) {
    x = x * 1103515245u + 12345u;
    junk += static_cast<char>((x >> 16) & 0xff);
  }
  std::string nested;
  for (int i = 0; i < 10000; ++i) nested += "<b>";
  nested += "Deep word.";
  for (int i = 0; i < 10000; ++i) nested += "</b>";
  std::string unclosed;
  for (int i = 0; i < 10000; ++i) unclosed += "<span>";
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"junk", junk},
      {"utf8", std::string("A \xff\xfe dog. \xc3\x28 runs \xe2\x82 fast.") + '\0' +
                   " Then <b>\x80</b>.\n"},
      {"long", std::string(1 << 20, 'a') + ". A dog.\n"},
      {"nested", nested + "\n"},
      {"unclosed", unclosed + "Text\n"}};
  for (const auto& [name, text] : inputs) {
    write_text(path(name + ".in"), text);
    for (const std::string format : {"text", "html", "html --html-lenient"}) {
      const auto r = run_command("timeout 300 " + translate("--beam 2 --format " + format +
                                                            " --input " + path(name + ".in") +
                                                            " --output " + path(name + ".out")));
      const std::string what = name + " as " + format;
      ASSERT_TRUE(r.status == 0 || r.status == 1) << what << ": exit " << r.status << r.output;
      if (r.status == 1) {
        EXPECT_NE(r.output.find("error"), std::string::npos) << what << r.output;
        continue;
      }
      size_t in_lines = 0;
      for (const char c : text) in_lines += c == '\n';
      if (!text.empty() && text.back() != '\n') ++in_lines;
      EXPECT_EQ(read_lines_of(path(name + ".out")).size(), in_lines) << what;
    }
  }
  // Markup that is fine in text is plain text there; in html, unclosed tags are an error unless
  // lenient.
  auto r = run_command(translate("--format html --input " + path("unclosed.in")));
  EXPECT_EQ(r.status, 1) << r.output;
  r = run_command(translate("--format html --html-lenient --input " + path("unclosed.in")));
  EXPECT_EQ(r.status, 0) << r.output;
}

// --alignment's variants: the step that predicts a piece (the default) and the step that
// consumes it link each target word once, in range; --reverse-checkpoint symmetrizes (links in
// range, some for each line); --reverse-checkpoint without alignments is refused.
TEST_F(QuickstartRun, AlignmentVariantsLinkWordsInRange) {
  const auto sentences = prose_sentences(data() + "/test.en", 12);
  std::string input;
  for (const auto& s : sentences) input += s + "\n";
  write_text(path("align.in"), input);
  for (const std::string& extra : std::vector<std::string>{
           "", "--alignment-step consume", "--reverse-checkpoint " + run()}) {
    const auto r = run_command(translate("--beam 2 --alignment " + extra + " --input " +
                                         path("align.in") + " --output " + path("align.out")));
    ASSERT_EQ(r.status, 0) << extra << r.output;
    const auto out = read_lines_of(path("align.out"));
    ASSERT_EQ(out.size(), sentences.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const auto bar = out[i].find(" ||| ");
      ASSERT_NE(bar, std::string::npos) << out[i];
      const auto hyp = split(trim(out[i].substr(0, bar)), ' ');
      const auto source = split(sentences[i], ' ');
      const auto links = split(trim(out[i].substr(bar + 5)), ' ');
      EXPECT_FALSE(links.empty() || links[0].empty()) << extra << out[i];
      std::vector<int> per_target(hyp.size(), 0);
      for (const auto& link : links) {
        const auto dash = link.find('-');
        ASSERT_NE(dash, std::string::npos) << link;
        const auto s = std::stoul(link.substr(0, dash)), t = std::stoul(link.substr(dash + 1));
        ASSERT_LT(s, source.size()) << out[i];
        ASSERT_LT(t, hyp.size()) << out[i];
        ++per_target[t];
      }
      if (extra.find("reverse") == std::string::npos)
        for (const int n : per_target) EXPECT_EQ(n, 1) << extra << out[i];
    }
  }
  const auto r = run_command(translate("--reverse-checkpoint " + run() + " --input " +
                                       path("align.in")));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--reverse-checkpoint aligns words"), std::string::npos) << r.output;
}
