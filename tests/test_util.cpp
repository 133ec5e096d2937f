#include <gtest/gtest.h>

#include "helpers.h"
#include "util/io.h"
#include "util/line_reader.h"
#include "util/lock.h"
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

// One reader for every input: plain, gzip (several members too), CRLF, no final newline; the
// same lines and content hash either way.
TEST(Files, LineReaderReadsPlainAndGzipAlike) {
  nmt_test::TempDir dir;
  std::string text;
  for (int i = 0; i < 50000; ++i) text += "line " + std::to_string(i) + (i % 7 ? "\n" : "\r\n");
  text += "last";
  nmt_test::write_text(dir / "plain", text);
  const std::string half = text.substr(0, 300001), rest = text.substr(300001);
  nmt_test::write_text(dir / "a", half);
  nmt_test::write_text(dir / "b", rest);
  ASSERT_EQ(nmt_test::run_command("gzip -c " + (dir / "plain") + " > " + (dir / "one.gz") +
                                  " && gzip -c " + (dir / "a") + " > " + (dir / "two.gz") +
                                  " && gzip -c " + (dir / "b") + " >> " + (dir / "two.gz"))
                .status,
            0);
  const auto want = read_lines(dir / "plain");
  ASSERT_EQ(want.size(), 50001u);
  EXPECT_EQ(want[7], "line 7");
  EXPECT_EQ(want.back(), "last");
  EXPECT_EQ(read_lines(dir / "one.gz"), want);
  EXPECT_EQ(read_lines(dir / "two.gz"), want);
  EXPECT_EQ(count_lines(dir / "two.gz"), 50001);
  LineReader a(dir / "plain"), b(dir / "two.gz");
  std::string line;
  while (a.next(line)) {
  }
  while (b.next(line)) {
  }
  EXPECT_EQ(a.content_hash(), b.content_hash());
  // A gzip file cut short names the file and the last whole line.
  const std::string gz = nmt_test::read_text(dir / "one.gz");
  nmt_test::write_text(dir / "cut.gz", gz.substr(0, gz.size() / 2));
  try {
    read_lines(dir / "cut.gz");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "cut.gz") + ": cannot read past line "),
              std::string::npos) << e.what();
  }
}

TEST(Files, AvailableMemoryIsRead) {
  EXPECT_GT(available_memory_bytes(), int64_t{1} << 20);
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

namespace {
// The Error's message, or "" when fn does not throw one.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Files, FailedWritesNameTheFileAndTheReason) {
  // /dev/full fails every write with ENOSPC, as a full disk does.
  OutFile full("/dev/full", OutFile::Mode::kTruncate);
  full.write("buffered, not yet written");
  EXPECT_EQ(error_of([&] { full.close(); }), "cannot write /dev/full: No space left on device");
  EXPECT_EQ(error_of([] { write_file_atomic("/dev/full/x", "a"); }),
            "cannot write /dev/full/x.tmp-" + std::to_string(::getpid()) + ": Not a directory");
  // A stream over an OutFile throws the same Error out of the stream operation.
  OutFile again("/dev/full", OutFile::Mode::kTruncate);
  OutFileStream out(again);
  EXPECT_EQ(error_of([&] { out << "text" << std::flush; }),
            "cannot write /dev/full: No space left on device");
  EXPECT_TRUE(out.bad());
}

TEST(Files, OutFileBuffersAndAppends) {
  nmt_test::TempDir dir;
  {
    OutFile f(dir / "f", OutFile::Mode::kTruncate);
    f.write("a");
    EXPECT_EQ(nmt_test::read_text(dir / "f"), "");  // in the buffer until flush
    f.flush();
    EXPECT_EQ(nmt_test::read_text(dir / "f"), "a");
    f.write(std::string(3 << 20, 'b'));  // larger than the buffer: written through
    f.close();
  }
  OutFile g(dir / "f", OutFile::Mode::kAppend);
  g.write("c");
  g.close();
  const std::string text = nmt_test::read_text(dir / "f");
  EXPECT_EQ(text.size(), (3u << 20) + 2);
  EXPECT_EQ(text.front(), 'a');
  EXPECT_EQ(text.back(), 'c');
}

TEST(Files, ReplaceDirectorySwapsWholeDirectories) {
  nmt_test::TempDir dir;
  namespace fs = std::filesystem;
  fs::create_directories(dir / "old");
  nmt_test::write_text(dir / "old/a", "old");
  fs::create_directories(dir / "new");
  nmt_test::write_text(dir / "new/b", "new");
  replace_directory(dir / "new", dir / "old");
  EXPECT_FALSE(fs::exists(dir / "new"));
  EXPECT_FALSE(fs::exists(dir / "old/a"));
  EXPECT_EQ(nmt_test::read_text(dir / "old/b"), "new");
  fs::create_directories(dir / "c");
  replace_directory(dir / "c", dir / "d");  // nothing to replace: a rename
  EXPECT_TRUE(fs::is_directory(dir / "d"));
}

TEST(Files, UnusablePathsAreNamed) {
  nmt_test::TempDir dir;
  nmt_test::write_text(dir / "file", "x");
  EXPECT_EQ(error_of([&] { create_directories(dir / "file"); }),
            "cannot create directory " + (dir / "file") + ": Not a directory");
  EXPECT_EQ(error_of([&] { create_directories(dir / "file/sub"); }),
            "cannot create directory " + (dir / "file/sub") + ": Not a directory");
  EXPECT_EQ(error_of([&] { check_writable_file(dir / "missing/out"); }),
            "cannot write " + (dir / "missing/out") + ": No such file or directory");
  EXPECT_EQ(error_of([&] { check_writable_file(dir.path()); }),
            "cannot write " + dir.path() + ": Is a directory");
  EXPECT_EQ(error_of([&] { check_writable_file(dir / "new"); }), "");
  EXPECT_FALSE(std::filesystem::exists(dir / "new"));  // the probe leaves nothing
  EXPECT_EQ(error_of([&] { check_writable_file(dir / "file"); }), "");
  EXPECT_EQ(nmt_test::read_text(dir / "file"), "x");  // nor truncates
  EXPECT_EQ(error_of([&] { check_writable_dir(dir / "made/here"); }), "");
  EXPECT_TRUE(std::filesystem::is_directory(dir / "made/here"));
}

TEST(Files, DirLockIsExclusiveAndNamesItsHolder) {
  nmt_test::TempDir dir;
  {
    DirLock lock(dir.path(), "nmt train");
    EXPECT_EQ(nmt_test::read_text(dir / ".lock"), std::to_string(::getpid()) + " nmt train\n");
    // flock conflicts between two open files even in one process.
    EXPECT_EQ(error_of([&] { DirLock second(dir.path(), "nmt train"); }),
              dir.path() + " is in use by nmt train (pid " + std::to_string(::getpid()) + ")");
  }
  DirLock after(dir.path(), "nmt train");  // released with the first
  EXPECT_EQ(error_of([&] { DirLock missing(dir / "missing", "nmt train"); }),
            "cannot write " + (dir / "missing") + ": No such file or directory");
}

// Two jobs never write one output file: the second is refused with the file and the holder's
// pid, the file is neither truncated nor created twice, and the lock goes with its holder.
TEST(Files, FileLockIsExclusiveAndNamesItsHolder) {
  nmt_test::TempDir dir;
  const std::string out = dir / "out.txt";
  nmt_test::write_text(out, "kept\n");
  {
    FileLock lock(out);
    const std::string error = error_of([&] { FileLock second(out); });
    EXPECT_EQ(error.rfind(out + " is being written by pid " + std::to_string(::getpid()), 0), 0u)
        << error;
    EXPECT_EQ(nmt_test::read_text(out), "kept\n");
  }
  FileLock after(out);  // released with the first
  FileLock fresh(dir / "new.txt");  // created when missing
  EXPECT_TRUE(std::filesystem::exists(dir / "new.txt"));
  EXPECT_THROW(FileLock(dir / "missing/out.txt"), Error);
}
