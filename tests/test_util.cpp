#include <gtest/gtest.h>

#include "helpers.h"
#include "util/util.h"

using namespace nmt;

TEST(Utf8, AcceptsValidAndRejectsMalformed) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("Grüße, 東京 🙂"));
  EXPECT_FALSE(is_valid_utf8("\xC3"));              // truncated
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // UTF-16 surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xFF"));
}

TEST(Utf8, SanitizeReplacesEachBadByteAndNul) {
  int64_t n = 0;
  EXPECT_EQ(sanitize_utf8(std::string("a\xFF") + '\0' + "b", &n),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(n, 2);
  EXPECT_EQ(sanitize_utf8("ok ü", &n), "ok ü");
  EXPECT_EQ(n, 0);
}

TEST(Strings, EditDistanceAndClosestMatch) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(closest_match("max_step", {"max_steps", "seed", "threads"}), "max_steps");
  EXPECT_EQ(closest_match("zzzzzz", {"max_steps", "seed"}), "");
}

TEST(Strings, SplitTrimChomp) {
  EXPECT_EQ(split("a.b..c", '.'), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(trim("  x y \t\n"), "x y");
  std::string s = "line\r";
  chomp_cr(s);
  EXPECT_EQ(s, "line");
}

TEST(Files, CountLinesWithAndWithoutFinalNewline) {
  nmt_test::TempDir dir;
  nmt_test::write_text(dir / "a", "1\n2\n3\n");
  nmt_test::write_text(dir / "b", "1\n2\n3");
  nmt_test::write_text(dir / "c", "");
  EXPECT_EQ(count_lines(dir / "a"), 3);
  EXPECT_EQ(count_lines(dir / "b"), 3);
  EXPECT_EQ(count_lines(dir / "c"), 0);
}

TEST(Files, AtomicWriteReplacesContentAndLeavesNoTemp) {
  nmt_test::TempDir dir;
  write_file_atomic(dir / "f", "old");
  write_file_atomic(dir / "f", "new");
  EXPECT_EQ(read_file(dir / "f"), "new");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}
