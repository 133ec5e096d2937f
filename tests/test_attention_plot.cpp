#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plot/attention.h"
#include "xml_check.h"

using namespace nmt;

namespace {

// Shown texts of the <text> elements under a label group, in document order.
std::vector<std::string> label_texts(const XmlNode& root, const std::string& cls) {
  std::vector<std::string> out;
  const XmlNode* g = find_group(root, cls);
  if (g == nullptr) return out;
  for (const XmlNode* t : find_all(*g, "text")) out.push_back(t->text);
  return out;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

AttentionMap make_map(std::vector<std::string> source, std::vector<std::string> target) {
  AttentionMap m;
  m.sentence = 12;
  m.layer = 3;
  m.num_heads = 4;
  m.source = std::move(source);
  m.target = std::move(target);
  for (size_t i = 0; i < m.target.size(); ++i) {
    std::vector<float> row;
    for (size_t j = 0; j < m.source.size(); ++j) {
      row.push_back(static_cast<float>((i * 7 + j * 3) % 11) / 10.0f);
    }
    m.weights.push_back(row);
  }
  return m;
}

AttentionMap german_english() {
  return make_map({"▁Das", "▁ist", "▁ein", "▁kleiner", "▁Test", ".", "</s>", "▁Grüße"},
                  {"▁This", "▁is", "▁a", "▁small", "▁test", "</s>"});
}

const std::string kFFFD = "\xEF\xBF\xBD";

std::vector<std::string> hostile_labels() {
  return {"<script>alert(1)</script>",
          "a&b",
          "\"quoted\" 'single'",
          "\xFF\xFE",
          "\xC0\xAF",      // overlong '/'
          "\xE2\x96",      // truncated ▁
          "\xED\xA0\x80",  // UTF-16 surrogate
          std::string("nul\0byte", 8),
          "ctl\x01\x08\x0B\x0C\x0E\x1F.",
          "\xEF\xBF\xBE",  // U+FFFE: valid UTF-8, forbidden in XML
          repeat("\xE2\x96\x81long", 60),
          "",
          "]]>",
          "&amp;",
          "<!-- -- -->",
          "tab\tnew\nline\r",
          "東京🙂"};
}

double luminance(const std::string& hex) {
  EXPECT_EQ(hex.size(), 7u) << hex;
  EXPECT_EQ(hex[0], '#') << hex;
  auto channel = [&](int k) {
    const double c = std::stoi(hex.substr(1 + 2 * k, 2), nullptr, 16) / 255.0;
    return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
}

// ---------------------------------------------------------------------------------------------

TEST(XmlChecker, AcceptsWellFormedDocuments) {
  XmlNode root;
  EXPECT_EQ(check_xml("<?xml version=\"1.0\"?>\n<a x='1' y=\"&lt;&#38;&#x41;\"><b/>t&amp;"
                      "<!-- c --><c>Grüße</c></a>\n",
                      &root),
            "");
  EXPECT_EQ(root.name, "a");
  EXPECT_EQ(root.attrs["y"], "<&A");
  EXPECT_EQ(root.text, "t&");
  ASSERT_EQ(root.children.size(), 2u);
  EXPECT_EQ(root.children[1].text, "Grüße");
}

TEST(XmlChecker, RejectsMalformedDocuments) {
  const std::vector<std::string> bad = {
      "",
      "<a>",
      "<a></b>",
      "<a><b></a></b>",
      "<a x=1/>",
      "<a x=\"1\"y=\"2\"/>",
      "<a x=\"1\" x=\"2\"/>",
      "<a x=\"<\"/>",
      "<a>&</a>",
      "<a>&bogus;</a>",
      "<a>&#1;</a>",
      "<a>&#xFFFE;</a>",
      "<a>a < b</a>",
      "<a/><b/>",
      "<a/>text",
      "text<a/>",
      "<a>]]></a>",
      "<a><!-- x -- y --></a>",
      "<a>\x01</a>",
      "<a>\xFF</a>",
      "<a>\xC0\xAF</a>",
      "<a>\xED\xA0\x80</a>",
      " <?xml version=\"1.0\"?><a/>",
      "<!DOCTYPE a><a/>",
  };
  for (const auto& doc : bad) EXPECT_NE(check_xml(doc), "") << "accepted: " << doc;
}

TEST(AttentionSvg, TypicalMapIsWellFormedWithLabelsAndCells) {
  const AttentionMap m = german_english();
  const std::string svg = attention_svg(m);
  const XmlNode root = parse_svg(svg);
  EXPECT_EQ(label_texts(root, "row-labels"), m.target);
  EXPECT_EQ(label_texts(root, "col-labels"), m.source);
  EXPECT_EQ(find_all(root, "rect", "cell").size(), m.target.size() * m.source.size());
  // Escaped forms in the raw text; the raw '<' of "</s>" must never appear.
  EXPECT_NE(svg.find("&lt;/s&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("</s>"), std::string::npos);
  EXPECT_NE(svg.find("▁Grüße"), std::string::npos);
}

TEST(AttentionSvg, CellCountIsRowsTimesColumns) {
  for (auto [rows, cols] : std::vector<std::pair<int, int>>{{1, 1}, {3, 5}, {6, 8}, {17, 2}}) {
    std::vector<std::string> src, tgt;
    for (int j = 0; j < cols; ++j) src.push_back("s" + std::to_string(j));
    for (int i = 0; i < rows; ++i) tgt.push_back("t" + std::to_string(i));
    const std::string svg = attention_svg(make_map(src, tgt));
    const XmlNode root = parse_svg(svg);
    auto cells = find_all(root, "rect", "cell");
    EXPECT_EQ(cells.size(), static_cast<size_t>(rows * cols)) << rows << "x" << cols;
    // Each cell carries its value as a tooltip.
    for (const XmlNode* c : cells) {
      ASSERT_EQ(c->children.size(), 1u);
      EXPECT_EQ(c->children[0].name, "title");
    }
    // Cells lie inside the canvas.
    const int w = std::atoi(root.attrs.at("width").c_str());
    const int h = std::atoi(root.attrs.at("height").c_str());
    for (const XmlNode* c : cells) {
      EXPECT_GE(std::atoi(c->attrs.at("x").c_str()), 0);
      EXPECT_LE(std::atoi(c->attrs.at("x").c_str()) + std::atoi(c->attrs.at("width").c_str()), w);
      EXPECT_LE(std::atoi(c->attrs.at("y").c_str()) + std::atoi(c->attrs.at("height").c_str()), h);
    }
  }
}

TEST(AttentionSvg, HostileLabelsStayWellFormed) {
  const std::vector<std::string> labels = hostile_labels();
  AttentionMap m = make_map(labels, labels);
  const std::string svg = attention_svg(m);
  const XmlNode root = parse_svg(svg);
  EXPECT_EQ(find_all(root, "rect", "cell").size(), labels.size() * labels.size());
  EXPECT_EQ(find_all(root, "script").size(), 0u);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(svg.find("a&amp;b"), std::string::npos);
  EXPECT_NE(svg.find("&quot;quoted&quot; &apos;single&apos;"), std::string::npos);
  EXPECT_NE(svg.find("&amp;amp;"), std::string::npos);
  // No raw control bytes other than the newlines between elements.
  for (char c : svg) {
    const unsigned char u = static_cast<unsigned char>(c);
    EXPECT_TRUE(u >= 0x20 || c == '\n') << "control byte " << int(u);
  }

  const std::vector<std::string> shown = label_texts(root, "row-labels");
  ASSERT_EQ(shown.size(), labels.size());
  EXPECT_EQ(shown[0], "<script>alert(1)</script…");  // 25 code points: cut at 24
  EXPECT_EQ(shown[1], "a&b");
  EXPECT_EQ(shown[3], kFFFD + kFFFD);
  EXPECT_EQ(shown[4], kFFFD + kFFFD);
  EXPECT_EQ(shown[5], kFFFD + kFFFD);
  EXPECT_EQ(shown[6], kFFFD + kFFFD + kFFFD);
  EXPECT_EQ(shown[7], "nulbyte");
  EXPECT_EQ(shown[8], "ctl.");
  EXPECT_EQ(shown[9], "");
  EXPECT_EQ(shown[11], "");
  EXPECT_EQ(shown[12], "]]>");
  EXPECT_EQ(shown[13], "&amp;");
  EXPECT_EQ(shown[15], "tab\tnew\nline\r");  // kept via character references
  EXPECT_EQ(shown[16], "東京🙂");
  // Hidden columns still labelled the same way.
  EXPECT_EQ(label_texts(root, "col-labels"), shown);
}

TEST(AttentionSvg, LongLabelsAreTruncatedWithFullTitle) {
  const std::string long_label = repeat("x", 300);
  const std::string exact = repeat("y", 24);
  const std::string wide = repeat("東", 30);
  const std::string svg = attention_svg(make_map({long_label, exact}, {wide, "b"}));
  const XmlNode root = parse_svg(svg);
  const auto cols = label_texts(root, "col-labels");
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(cols[0], repeat("x", 24) + "…");
  EXPECT_EQ(cols[1], exact);  // at the limit: not cut
  EXPECT_EQ(label_texts(root, "row-labels")[0], repeat("東", 24) + "…");

  // The full label sits in a <title> beside the shown text, inside one <g>.
  const XmlNode* g = find_group(root, "col-labels");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->children.size(), 2u);
  ASSERT_EQ(g->children[0].name, "g");
  ASSERT_EQ(g->children[0].children.size(), 2u);
  EXPECT_EQ(g->children[0].children[0].name, "title");
  EXPECT_EQ(g->children[0].children[0].text, long_label);
  EXPECT_EQ(g->children[1].name, "text");  // not truncated: no wrapper
  EXPECT_NE(svg.find(wide), std::string::npos);

  // A custom limit applies too.
  AttentionSvgOptions opt;
  opt.max_label_cps = 5;
  const XmlNode r2 = parse_svg(attention_svg(make_map({"abcdefgh"}, {"▁Grüße!"}), opt));
  EXPECT_EQ(label_texts(r2, "col-labels")[0], "abcde…");
  EXPECT_EQ(label_texts(r2, "row-labels")[0], "▁Grüß…");
}

TEST(AttentionSvg, CanvasGrowsWithLabelLength) {
  auto size_of = [](const AttentionMap& m) {
    XmlNode root = parse_svg(attention_svg(m));
    return std::make_pair(std::atoi(root.attrs["width"].c_str()),
                          std::atoi(root.attrs["height"].c_str()));
  };
  // 20 columns, so the grid rather than the title sets the width.
  std::vector<std::string> src(20, "a");
  const auto base = size_of(make_map(src, {"c", "d"}));
  const auto long_tgt = size_of(make_map(src, {"c", repeat("d", 20)}));
  src.back() = repeat("b", 20);
  const auto long_src = size_of(make_map(src, {"c", "d"}));
  EXPECT_GT(long_src.second, base.second);  // rotated column labels need height ...
  EXPECT_GT(long_src.first, base.first);    // ... and overhang to the right
  EXPECT_GT(long_tgt.first, base.first);    // row labels need width
  // 20 narrow characters at 12px are at least ~120px wide; the row-label margin must hold them.
  EXPECT_GE(long_tgt.first - base.first, 100);
  // Wide (CJK) characters are budgeted wider than narrow ones.
  const auto cjk = size_of(make_map(std::vector<std::string>(20, "a"), {"c", repeat("東", 20)}));
  EXPECT_GT(cjk.first, long_tgt.first);
}

TEST(AttentionSvg, HigherWeightGivesDarkerFill) {
  EXPECT_EQ(attention_fill(0.0f), "#ffffff");
  double prev = luminance(attention_fill(0.0f));
  for (int k = 1; k <= 20; ++k) {
    const double lum = luminance(attention_fill(k / 20.0f));
    EXPECT_LT(lum, prev) << "weight " << k / 20.0;
    prev = lum;
  }
  // Out-of-range values clamp for colour.
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(attention_fill(-0.5f), attention_fill(0.0f));
  EXPECT_EQ(attention_fill(-inf), attention_fill(0.0f));
  EXPECT_EQ(attention_fill(3.0f), attention_fill(1.0f));
  EXPECT_EQ(attention_fill(inf), attention_fill(1.0f));
  // NaN is a neutral grey, distinct from the ramp's ends.
  const std::string nan_fill = attention_fill(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan_fill.substr(1, 2), nan_fill.substr(3, 2));
  EXPECT_EQ(nan_fill.substr(1, 2), nan_fill.substr(5, 2));
  EXPECT_NE(nan_fill, attention_fill(0.0f));
  EXPECT_NE(nan_fill, attention_fill(1.0f));

  // The same ordering in the rendered cells.
  AttentionMap m = make_map({"a", "b", "c"}, {"x"});
  m.weights = {{0.1f, 0.9f, 0.5f}};
  const XmlNode root = parse_svg(attention_svg(m));
  auto cells = find_all(root, "rect", "cell");
  ASSERT_EQ(cells.size(), 3u);
  const double l0 = luminance(cells[0]->attrs.at("fill"));
  const double l1 = luminance(cells[1]->attrs.at("fill"));
  const double l2 = luminance(cells[2]->attrs.at("fill"));
  EXPECT_LT(l1, l2);
  EXPECT_LT(l2, l0);
}

TEST(AttentionSvg, TooltipsShowStoredValuesAndNaNIsGrey) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  AttentionMap m = make_map({"a", "b", "c", "d", "e"}, {"x"});
  m.weights = {{nan, inf, -0.5f, 0.25f, 1.5f}};
  const std::string svg = attention_svg(m);
  const XmlNode root = parse_svg(svg);
  auto cells = find_all(root, "rect", "cell");
  ASSERT_EQ(cells.size(), 5u);
  const std::vector<std::string> want = {"x ← a: NaN", "x ← b: inf", "x ← c: -0.5", "x ← d: 0.25",
                                         "x ← e: 1.5"};
  for (size_t j = 0; j < cells.size(); ++j) {
    ASSERT_EQ(cells[j]->children.size(), 1u);
    EXPECT_EQ(cells[j]->children[0].text, want[j]);
  }
  EXPECT_EQ(cells[0]->attrs.at("fill"), attention_fill(nan));
  EXPECT_EQ(cells[1]->attrs.at("fill"), attention_fill(1.0f));
  EXPECT_EQ(cells[2]->attrs.at("fill"), attention_fill(0.0f));
  // The legend explains grey cells only when there are any.
  EXPECT_NE(svg.find(">NaN</text>"), std::string::npos);
  EXPECT_EQ(attention_svg(german_english()).find(">NaN</text>"), std::string::npos);
}

TEST(AttentionSvg, TooltipsCanBeTurnedOff) {
  AttentionSvgOptions opt;
  opt.cell_tooltips = false;
  opt.cell_px = 10;
  const AttentionMap m = german_english();
  const XmlNode root = parse_svg(attention_svg(m, opt));
  auto cells = find_all(root, "rect", "cell");
  ASSERT_EQ(cells.size(), 48u);
  for (const XmlNode* c : cells) {
    EXPECT_TRUE(c->children.empty());
    EXPECT_EQ(c->attrs.at("width"), "10");
  }
}

TEST(AttentionSvg, TitleNamesSentenceLayerAndHead) {
  AttentionMap m = german_english();
  EXPECT_NE(attention_svg(m).find(">sentence 12 · layer 3 · mean of 4 heads</text>"),
            std::string::npos);
  m.num_heads = 0;
  EXPECT_NE(attention_svg(m).find(">sentence 12 · layer 3 · mean over heads</text>"),
            std::string::npos);
  m.head = 2;
  EXPECT_NE(attention_svg(m).find(">sentence 12 · layer 3 · head 2</text>"), std::string::npos);
}

TEST(AttentionSvg, EmptyMatrixIsStillValid) {
  std::vector<AttentionMap> maps;
  maps.push_back(make_map({}, {}));
  maps.push_back(make_map({"a", "b", "c"}, {}));
  maps.push_back(make_map({}, {"x", "y"}));  // two empty rows
  for (const AttentionMap& m : maps) {
    const std::string svg = attention_svg(m);
    const XmlNode root = parse_svg(svg);
    EXPECT_TRUE(find_all(root, "rect", "cell").empty());
    auto notes = find_all(root, "text", "note");
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0]->text, "empty attention matrix: " + std::to_string(m.target.size()) +
                                  " target × " + std::to_string(m.source.size()) +
                                  " source pieces");
  }
}

TEST(AttentionSvg, ShapeMismatchThrows) {
  AttentionMap m = german_english();
  m.weights.pop_back();
  EXPECT_THROW(attention_svg(m), std::invalid_argument);
  EXPECT_THROW(attention_json(m), std::invalid_argument);
  try {
    attention_svg(m);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("5 rows but there are 6 target labels"), std::string::npos)
        << e.what();
  }

  m = german_english();
  m.weights[2].push_back(0.5f);  // ragged
  EXPECT_THROW(attention_svg(m), std::invalid_argument);
  try {
    attention_json(m);
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("row 2 has 9 columns but there are 8 source labels"),
              std::string::npos)
        << e.what();
  }

  m = make_map({}, {});
  m.weights = {{}};  // a row without a target label
  EXPECT_THROW(attention_svg(m), std::invalid_argument);
}

TEST(AttentionSvg, PythonXmlParserAcceptsOutput) {
  std::vector<AttentionMap> maps = {german_english(), make_map({}, {}),
                                    make_map(hostile_labels(), hostile_labels())};
  maps[2].weights[0][0] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::string> docs;
  for (const auto& m : maps) {
    docs.push_back(attention_svg(m));
    parse_svg(docs.back());  // the in-test checker always runs
  }
  const char* python = "/usr/bin/python3";
  if (::access(python, X_OK) != 0) {
    std::cout << "[ NOTE     ] " << python << " not found: checked with the in-test parser only\n";
    return;
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "nmt-attn-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  for (size_t k = 0; k < docs.size(); ++k) {
    const std::string path = dir + "/map" + std::to_string(k) + ".svg";
    {
      std::ofstream f(path, std::ios::binary);
      f << docs[k];
    }
    const std::string cmd = std::string(python) +
                            " -c \"import xml.dom.minidom,sys; "
                            "d=xml.dom.minidom.parse(sys.argv[1]); "
                            "sys.exit(0 if d.documentElement.tagName=='svg' else 3)\" '" +
                            path + "'";
    const int rc = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << "python rejected map " << k;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(AttentionJson, RoundTripsShapeAndValues) {
  AttentionMap m = german_english();
  m.weights[0][0] = 0.123456789f;
  m.weights[1][1] = 1e-7f;
  const std::string text = attention_json(m);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j.size(), 6u);
  EXPECT_EQ(j.at("sentence").get<int64_t>(), 12);
  EXPECT_EQ(j.at("layer").get<int64_t>(), 3);
  EXPECT_TRUE(j.at("head").is_null());
  EXPECT_EQ(j.at("source").get<std::vector<std::string>>(), m.source);
  EXPECT_EQ(j.at("target").get<std::vector<std::string>>(), m.target);
  const auto& w = j.at("weights");
  ASSERT_EQ(w.size(), m.target.size());
  for (size_t r = 0; r < w.size(); ++r) {
    ASSERT_EQ(w[r].size(), m.source.size());
    for (size_t c = 0; c < w[r].size(); ++c) {
      const double want = m.weights[r][c];
      EXPECT_NEAR(w[r][c].get<double>(), want, 5e-6 * std::fabs(want)) << r << "," << c;
    }
  }
  // Rounded to 6 significant digits, not printed as the double nearest a float.
  EXPECT_NE(text.find("0.123457"), std::string::npos);
  EXPECT_EQ(text.find("0.1234567"), std::string::npos);
  EXPECT_NE(text.find("0.1,"), std::string::npos) << text;  // 0.1f prints as 0.1
  EXPECT_EQ(text.find("0.10000000"), std::string::npos);
  EXPECT_EQ(text.find("0.1000000"), std::string::npos);
}

TEST(AttentionJson, HeadIndexAndNonFiniteValues) {
  AttentionMap m = make_map({"a", "b", "c"}, {"x"});
  m.head = 2;
  m.weights = {
      {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 0.5f}};
  const nlohmann::json j = nlohmann::json::parse(attention_json(m));
  EXPECT_EQ(j.at("head").get<int64_t>(), 2);
  EXPECT_TRUE(j["weights"][0][0].is_null());
  EXPECT_TRUE(j["weights"][0][1].is_null());
  EXPECT_DOUBLE_EQ(j["weights"][0][2].get<double>(), 0.5);
}

TEST(AttentionJson, InvalidUtf8IsReplacedNotThrown) {
  const std::vector<std::string> labels = hostile_labels();
  const AttentionMap m = make_map(labels, {"ok\xFF", std::string("a\0b", 3)});
  std::string text;
  ASSERT_NO_THROW(text = attention_json(m));
  EXPECT_EQ(check_chars(text, /*xml=*/false), "");  // valid UTF-8 throughout
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["target"][0].get<std::string>(), "ok" + kFFFD);
  EXPECT_EQ(j["target"][1].get<std::string>(), std::string("a\0b", 3));  // JSON escapes it
  EXPECT_EQ(j["source"][0].get<std::string>(), labels[0]);
  EXPECT_EQ(j["source"][3].get<std::string>(), kFFFD + kFFFD);
  EXPECT_EQ(j["source"][10].get<std::string>(), labels[10]);  // long labels kept whole
  EXPECT_EQ(j["weights"].size(), 2u);
  EXPECT_EQ(j["weights"][0].size(), labels.size());
}

TEST(AttentionJson, EmptyMatrices) {
  nlohmann::json j = nlohmann::json::parse(attention_json(make_map({}, {})));
  EXPECT_TRUE(j["weights"].is_array());
  EXPECT_TRUE(j["weights"].empty());
  EXPECT_TRUE(j["source"].empty());
  j = nlohmann::json::parse(attention_json(make_map({}, {"x", "y"})));
  EXPECT_EQ(j["weights"], nlohmann::json::parse("[[], []]"));
}

}  // namespace
