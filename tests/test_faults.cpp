// Faults of the machine: a failed write at every I/O operation nmt performs (the
// NMT_DEBUG_FAIL_IO hook, util/io.h), a real full disk, unwritable paths, and two trainers on one
// run directory. Every fault must end in one "nmt: error:" line naming the file and the OS's
// reason with exit status 1, never in an abort, a signal or a hang, and must leave the complete
// checkpoints from which --resume finishes the run bit-exactly.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "helpers.h"

using nlohmann::json;
using nmt_test::nmt_bin;
using nmt_test::read_text;
using nmt_test::run_command;
namespace fs = std::filesystem;

extern char** environ;

namespace {

std::string make_data(const nmt_test::TempDir& dir) {
  const std::string data = dir / "data";
  const auto r = run_command("python3 scripts/make_quickstart_data.py --out " + data +
                             " --train 200 --valid 5 --test 5");
  EXPECT_EQ(r.status, 0) << r.output;
  return data;
}

// A tiny Transformer on quickstart data: 4 steps with a validation and a save every 2 (two saves,
// a best checkpoint), a log row every 2.
std::string train_command(const std::string& data, const std::string& run, int steps = 4,
                          int save_every = 2) {
  return nmt_bin() + " train --config configs/quickstart.json --run-dir " + run +
         " --set model.d_model=16 --set model.d_ff=32 --set model.heads=2"
         " --set model.encoder_layers=1 --set model.decoder_layers=1 --set data.train_src=" +
         data + "/train.en --set data.train_tgt=" + data +
         "/train.de --set data.valid_src=" + data + "/valid.en --set data.valid_tgt=" + data +
         "/valid.de --set vocab.size=60 --set train.threads=1 --set train.batch_tokens=300"
         " --set train.valid_every=2 --set train.log_every=2 --set train.keep_last=100"
         " --set train.save_every=" +
         std::to_string(save_every) + " --set train.max_steps=" + std::to_string(steps);
}

struct IoOp {
  std::string op, path;
};

// The operations a run performed, in order (NMT_DEBUG_IO_TRACE lines "N op path").
std::vector<IoOp> read_trace(const std::string& path) {
  std::vector<IoOp> ops;
  for (const auto& line : nmt_test::read_lines_of(path)) {
    std::istringstream in(line);
    int64_t n = 0;
    IoOp op;
    in >> n >> op.op;
    std::getline(in >> std::ws, op.path);
    EXPECT_EQ(n, static_cast<int64_t>(ops.size()) + 1) << line;
    ops.push_back(op);
  }
  return ops;
}

// What a fault class is called in the summary: the operation and the file, with run-specific
// parts (directories, pids) dropped.
std::string fault_class(const IoOp& op, const std::string& root) {
  std::string p = op.path.rfind(root, 0) == 0 ? op.path.substr(root.size()) : op.path;
  if (p.find("/.tmp-best") != std::string::npos || p.find("/best") != std::string::npos)
    p = "best/" + fs::path(p).filename().string();
  else if (p.find("/.tmp-ckpt") != std::string::npos || p.find("/ckpt-") != std::string::npos)
    p = "ckpt/" + fs::path(p).filename().string();
  else
    p = fs::path(p).filename().string();
  if (const auto t = p.find(".tmp-"); t != std::string::npos) p = p.substr(0, t) + ".tmp";
  // Attention files: NNNNNN.svg and NNNNNN.json, one class each.
  if (p.size() > 6 && p.find_first_not_of("0123456789") == 6) p = "NNNNNN" + p.substr(6);
  if (p.rfind("ckpt/.tmp", 0) == 0 || p.rfind("best/.tmp", 0) == 0 || p == "ckpt/ckpt")
    p = p.substr(0, 4) + "(dir)";
  return op.op + " " + (p.empty() ? "(the directory itself)" : p);
}

// metrics.jsonl without its timings: what an interrupted and resumed run must reproduce.
std::vector<std::string> metric_rows(const std::string& path) {
  std::vector<std::string> rows;
  for (const auto& line : nmt_test::read_lines_of(path)) {
    json j = json::parse(line);
    json kept;
    for (const auto& [key, value] : j.items())
      if (key.size() < 2 || key.compare(key.size() - 2, 2, "_s") != 0) kept[key] = value;
    rows.push_back(kept.dump());
  }
  return rows;
}

bool has_leftovers(const std::string& run) {
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(run, ec))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return true;
  return false;
}

void expect_clean_failure(const nmt_test::RunResult& r, const std::string& reason,
                          const std::string& context) {
  EXPECT_EQ(r.status, 1) << context << "\n" << r.output;
  const auto e = r.output.find("nmt: error: cannot ");
  EXPECT_NE(e, std::string::npos) << context << "\n" << r.output;
  EXPECT_NE(r.output.find(reason, e == std::string::npos ? 0 : e), std::string::npos)
      << context << "\n"
      << r.output;
  for (const char* crash :
       {"terminate called", "Aborted", "core dumped", "frame #", "Segmentation"})
    EXPECT_EQ(r.output.find(crash), std::string::npos) << context << "\n" << r.output;
}

// The error names the file the failed operation was on (a temporary one by its final name's
// directory or stem: the pid part differs from run to run).
void expect_names_file(const nmt_test::RunResult& r, const std::string& path,
                       const std::string& context) {
  const auto pid = path.find(".tmp-");
  EXPECT_NE(r.output.find(path.substr(0, pid == std::string::npos ? path.size() : pid)),
            std::string::npos)
      << context << "\n"
      << r.output;
}

std::string fault_env(size_t n) {
  // Alternately a full disk and an I/O error.
  return "NMT_DEBUG_FAIL_IO=" + std::to_string(n) + (n % 2 == 0 ? ":EIO " : " ");
}
std::string reason_of(size_t n) {
  return n % 2 == 0 ? "Input/output error" : "No space left on device";
}

void print_summary(const char* what, const std::map<std::string, std::map<std::string, int>>& s) {
  int total = 0;
  for (const auto& [cls, ends] : s)
    for (const auto& [end, count] : ends) total += count;
  std::cout << what << ": " << total << " injected faults\n";
  for (const auto& [cls, ends] : s) {
    std::cout << "  " << cls << ":";
    for (const auto& [end, count] : ends) std::cout << " " << count << " " << end;
    std::cout << "\n";
  }
}

}  // namespace

// Every I/O operation of a short training run, failed in turn: the clear error, no partial
// checkpoint left, and a restart (--resume from the newest complete checkpoint, or a fresh start
// when none was complete) ends with the weights and metrics of a run that never failed.
TEST(Faults, EveryWriteOfATrainingRun) {
  nmt_test::TempDir dir;
  const std::string data = make_data(dir);
  ASSERT_FALSE(HasFailure());
  const std::string ref = dir / "ref";
  auto r = run_command("NMT_DEBUG_IO_TRACE=" + (dir / "trace") + " " + train_command(data, ref));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto ops = read_trace(dir / "trace");
  const std::string weights = read_text(ref + "/checkpoints/ckpt-00000004/model.pt");
  const auto rows = metric_rows(ref + "/metrics.jsonl");
  ASSERT_FALSE(weights.empty());
  ASSERT_EQ(rows.size(), 4u);  // two training rows, two validations
  // The run touched every kind of file the issue lists.
  std::string all;
  for (const auto& op : ops) all += op.op + " " + op.path + "\n";
  for (const char* file : {"/.lock", "/train.log", "/metrics.jsonl", "/config.json", "/spm.model",
                           "/model.pt", "/optimizer.pt", "/rng.pt", "/state.json", ".tmp-best"})
    EXPECT_NE(all.find(file), std::string::npos) << file << " never written\n" << all;
  for (const char* op : {"open ", "write ", "fsync ", "close ", "rename ", "mkdir "})
    EXPECT_NE(all.find(op), std::string::npos) << op;

  std::map<std::string, std::map<std::string, int>> summary;
  for (size_t n = 1; n <= ops.size(); ++n) {
    const std::string run = dir / ("run-" + std::to_string(n));
    const std::string context =
        "fault " + std::to_string(n) + ": " + ops[n - 1].op + " " + ops[n - 1].path;
    r = run_command(fault_env(n) + "timeout 120 " + train_command(data, run));
    expect_clean_failure(r, reason_of(n), context);
    // The error names the file (the run's own path for it).
    std::string path = ops[n - 1].path;
    expect_names_file(r, path.replace(0, ref.size(), run), context);
    EXPECT_FALSE(has_leftovers(run)) << context;
    const bool resume =
        !run_command("ls -d " + run + "/checkpoints/ckpt-* 2>/dev/null").output.empty();
    const auto again =
        run_command("timeout 120 " + train_command(data, run) + (resume ? " --resume" : ""));
    ASSERT_EQ(again.status, 0) << context << "\n" << again.output;
    if (resume) EXPECT_NE(again.output.find("resumed from"), std::string::npos) << context;
    EXPECT_EQ(read_text(run + "/checkpoints/ckpt-00000004/model.pt"), weights) << context;
    EXPECT_EQ(metric_rows(run + "/metrics.jsonl"), rows) << context;
    const std::string end = HasFailure() ? "FAILED" : resume ? "error+resume" : "error+restart";
    ++summary[fault_class(ops[n - 1], ref)][end];
    if (HasFailure()) break;
    fs::remove_all(run);
  }
  print_summary("training", summary);
  RecordProperty("faults", static_cast<int>(ops.size()));
}

// The same for translate (a file, attention heatmaps, standard output), eval (--hyp-out and the
// report) and average: each operation failed in turn ends in the clear error.
TEST(Faults, EveryWriteOfTranslateEvalAndAverage) {
  nmt_test::TempDir dir;
  const std::string data = make_data(dir);
  ASSERT_FALSE(HasFailure());
  const std::string run = dir / "run";
  auto r = run_command(train_command(data, run));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string ckpt = run + "/checkpoints/ckpt-00000004";
  const std::string in = dir / "in.txt";  // three lines: two chunks, three heatmaps
  nmt_test::write_text(in, "seven\none two\nthree\n");
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"translate", nmt_bin() + " translate --checkpoint " + ckpt + " --input " + in +
                        " --chunk-lines 2 --output " + (dir / "out/hyp.txt") + " --attention-out " +
                        (dir / "out/attention")},
      {"translate to stdout", nmt_bin() + " translate --checkpoint " + ckpt + " --input " + in +
                                  " --chunk-lines 2 > " + (dir / "out/stdout.txt")},
      {"eval", nmt_bin() + " eval --checkpoint " + ckpt + " --src " + in + " --ref " + in +
                   " --hyp-out " + (dir / "out/eval.txt") + " --json > " +
                   (dir / "out/report.json")},
      {"average",
       nmt_bin() + " average --run-dir " + run + " --last 2 --output " + (dir / "out/averaged")},
  };
  std::map<std::string, std::map<std::string, int>> summary;
  for (const auto& [name, command] : commands) {
    fs::remove_all(dir / "out");
    fs::create_directories(dir / "out");
    fs::remove(dir / "trace");
    r = run_command("NMT_DEBUG_IO_TRACE=" + (dir / "trace") + " " + command);
    ASSERT_EQ(r.status, 0) << name << "\n" << r.output;
    const auto ops = read_trace(dir / "trace");
    ASSERT_GE(ops.size(), 2u) << name;
    for (size_t n = 1; n <= ops.size(); ++n) {
      fs::remove_all(dir / "out");
      fs::create_directories(dir / "out");
      const std::string context =
          name + ", fault " + std::to_string(n) + ": " + ops[n - 1].op + " " + ops[n - 1].path;
      r = run_command(fault_env(n) + "timeout 120 " + command);
      expect_clean_failure(r, reason_of(n), context);
      expect_names_file(r, ops[n - 1].path, context);
      EXPECT_FALSE(has_leftovers(dir / "out")) << context;
      ++summary[name + ": " + fault_class(ops[n - 1], dir / "out")]
               [HasFailure() ? "FAILED" : "error"];
      if (HasFailure()) break;
    }
  }
  print_summary("translate, eval, average", summary);
}

// A real full disk: a small tmpfs in a private mount namespace (skipped where the machine
// allows none). Training fills it and stops with the OS's error; the checkpoints written before
// load, and after the file system grows --resume ends with the weights of an uninterrupted run.
TEST(Faults, RealFullDisk) {
  nmt_test::TempDir dir;
  const std::string data = make_data(dir);
  ASSERT_FALSE(HasFailure());
  const auto probe = run_command(
      "unshare --user --map-root-user --mount sh -c 'mount -t tmpfs "
      "-o size=1m tmpfs " +
      dir.path() + " && echo mounted'");
  if (probe.output.find("mounted") == std::string::npos)
    GTEST_SKIP() << "no tmpfs in a user namespace here: " << probe.output;
  const std::string ref = dir / "ref";
  auto r = run_command(train_command(data, ref, 12, 1));
  ASSERT_EQ(r.status, 0) << r.output;

  const std::string disk = dir / "disk", run = disk + "/run";
  fs::create_directories(disk);
  nmt_test::write_text(dir / "in.txt", "seven\n");
  // One namespace for the whole story, so the tmpfs lives through it; results go outside it.
  const std::string script =
      "set -u; mount -t tmpfs -o size=2m tmpfs " + disk + " || exit 90; " +
      train_command(data, run, 12, 1) + " > " + (dir / "full.log") + " 2>&1; echo $? > " +
      (dir / "full.status") + "; ls " + run + "/checkpoints > " + (dir / "listing") +
      "; last=$(ls -d " + run + "/checkpoints/ckpt-* | tail -1); " + nmt_bin() +
      " translate --checkpoint $last --input " + (dir / "in.txt") + " > " +
      (dir / "translate.log") + " 2>&1; echo $? > " + (dir / "translate.status") +
      "; mount -o remount,size=64m " + disk + "; " + train_command(data, run, 12, 1) +
      " --resume > " + (dir / "resume.log") + " 2>&1; echo $? > " + (dir / "resume.status") +
      "; cp " + run + "/checkpoints/ckpt-00000012/model.pt " + (dir / "final.pt");
  nmt_test::write_text(dir / "script.sh", script);
  r = run_command("unshare --user --map-root-user --mount sh " + (dir / "script.sh"));
  ASSERT_EQ(r.status, 0) << r.output;

  nmt_test::RunResult full{std::stoi(read_text(dir / "full.status")), read_text(dir / "full.log")};
  expect_clean_failure(full, "No space left on device", "full disk");
  const std::string listing = read_text(dir / "listing");
  EXPECT_NE(listing.find("ckpt-00000001"), std::string::npos) << listing;
  EXPECT_EQ(listing.find(".tmp-"), std::string::npos) << listing;
  EXPECT_EQ(listing.find("ckpt-00000012"), std::string::npos) << "the disk never filled";
  EXPECT_EQ(read_text(dir / "translate.status"), "0\n") << read_text(dir / "translate.log");
  EXPECT_EQ(read_text(dir / "resume.status"), "0\n") << read_text(dir / "resume.log");
  EXPECT_EQ(read_text(dir / "final.pt"), read_text(ref + "/checkpoints/ckpt-00000012/model.pt"));
  std::cout << "full disk: " << full.output.substr(full.output.find("nmt: error:"))
            << "checkpoints left: " << listing;
}

using nmt_test::spawn;
using nmt_test::wait_for;

// One trainer per run directory: a second one fails at once naming the first's pid, readers keep
// working, and after kill -9 of the holder a new trainer takes the lock and resumes.
TEST(Faults, OneTrainerPerRunDirectory) {
  nmt_test::TempDir dir;
  const std::string data = make_data(dir);
  ASSERT_FALSE(HasFailure());
  const std::string run = dir / "run";
  const std::string command = train_command(data, run, 1000000, 5);
  const pid_t first = spawn(command + " > " + (dir / "first.log") + " 2>&1");
  ASSERT_GT(first, 0);
  const bool started = wait_for(
      [&] {
        return read_text(run + "/.lock").rfind(std::to_string(first) + " ", 0) == 0 &&
               !run_command("ls -d " + run + "/checkpoints/ckpt-* 2>/dev/null").output.empty();
      },
      120);
  if (!started) ::kill(first, SIGKILL);
  ASSERT_TRUE(started) << read_text(dir / "first.log");
  const std::string log_before = read_text(run + "/train.log");

  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_command(command);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("nmt: error: " + run + " is in use by nmt train (pid " +
                          std::to_string(first) + ")"),
            std::string::npos)
      << r.output;
  EXPECT_LT(secs, 30) << "the second trainer did not fail fast";
  // It wrote nothing into the run directory, not even a log line.
  EXPECT_EQ(read_text(run + "/train.log").find("nmt train: run dir", log_before.size()),
            std::string::npos);
  // Readers need no lock.
  nmt_test::write_text(dir / "in.txt", "seven\n");
  r = run_command(nmt_bin() + " translate --checkpoint " + run + " --input " + (dir / "in.txt"));
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_command(nmt_bin() + " average --run-dir " + run + " --last 1 --output " +
                  (dir / "averaged"));
  EXPECT_EQ(r.status, 0) << r.output;

  ::kill(first, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(first, &status, 0), first);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const auto newest = run_command("ls -d " + run + "/checkpoints/ckpt-* | tail -1").output;
  const int64_t step = std::stoll(newest.substr(newest.rfind('-') + 1));
  r = run_command(train_command(data, run, static_cast<int>(step) + 2, 5) + " --resume");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
}

// Paths that cannot be written are refused before any work, naming the path.
TEST(Faults, UnwritablePathsAreRefusedFirst) {
  nmt_test::TempDir dir;
  const std::string data = make_data(dir);
  ASSERT_FALSE(HasFailure());
  nmt_test::write_text(dir / "file", "x");
  const std::string run = dir / "run";
  auto r = run_command(train_command(data, run));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string ckpt = run + "/checkpoints/ckpt-00000004";
  const std::string in = data + "/valid.en";
  const std::string missing = dir / "missing/sub";
  fs::create_directories(dir / "logdir/train.log");

  struct Case {
    std::string name, command, expected;
  };
  const std::vector<Case> cases = {
      {"run dir is a file", train_command(data, dir / "file"),
       "cannot create directory " + (dir / "file") + ": Not a directory"},
      {"run dir under a file", train_command(data, dir / "file/run"),
       "cannot create directory " + (dir / "file/run") + ": Not a directory"},
      {"train.log is a directory", train_command(data, dir / "logdir"),
       "cannot write " + (dir / "logdir/train.log") + ": Is a directory"},
      {"translate output without a parent",
       nmt_bin() + " translate --checkpoint " + ckpt + " --input " + in + " --output " + missing +
           "/out.txt",
       "cannot write " + missing + "/out.txt: No such file or directory"},
      {"translate output is a directory",
       nmt_bin() + " translate --checkpoint " + ckpt + " --input " + in + " --output " + dir.path(),
       "cannot write " + dir.path() + ": Is a directory"},
      {"attention directory is a file",
       nmt_bin() + " translate --checkpoint " + ckpt + " --input " + in + " --attention-out " +
           (dir / "file"),
       "cannot create directory " + (dir / "file") + ": Not a directory"},
      {"eval --hyp-out without a parent",
       nmt_bin() + " eval --checkpoint " + ckpt + " --src " + in + " --ref " + data +
           "/valid.de --hyp-out " + missing + "/hyp.txt",
       "cannot write " + missing + "/hyp.txt: No such file or directory"},
      {"average output under a file",
       nmt_bin() + " average --checkpoints " + ckpt + " --output " + (dir / "file/avg"),
       "cannot create directory " + (dir / "file") + ": Not a directory"},
      {"translate to a full device",
       nmt_bin() + " translate --checkpoint " + ckpt + " --input " + in + " --output /dev/full",
       "cannot write /dev/full: No space left on device"},
      {"translate to a full standard output",
       nmt_bin() + " translate --checkpoint " + ckpt + " --input " + in + " > /dev/full",
       "cannot write standard output: No space left on device"},
      {"eval report to a full standard output",
       nmt_bin() + " eval --hyp " + data + "/valid.de --ref " + data + "/valid.de > /dev/full",
       "cannot write standard output: No space left on device"},
  };
  for (const auto& c : cases) {
    r = run_command(c.command);
    EXPECT_EQ(r.status, 1) << c.name << "\n" << r.output;
    EXPECT_NE(r.output.find("nmt: error: " + c.expected), std::string::npos) << c.name << "\n"
                                                                             << r.output;
    // Refused before the work: no training step, no model loaded, no translation.
    const bool late = c.name.find("full") != std::string::npos;
    if (!late) {
      for (const char* work : {"step ", "loaded ", "translating "})
        EXPECT_EQ(r.output.find(work), std::string::npos) << c.name << "\n" << r.output;
    }
  }

  // Permissions: root passes them, so as an unmapped user in a user namespace there.
  fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  fs::create_directories(dir / "ro");
  fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec |
                                  fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  std::string as_user;
  if (::geteuid() == 0) {
    if (run_command("unshare --user true").status != 0)
      GTEST_SKIP() << "running as root without user namespaces: permissions are not checked";
    as_user = "unshare --user ";
  }
  r = run_command(as_user + train_command(data, dir / "ro/run"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("nmt: error: cannot create directory " + (dir / "ro/run") +
                          ": Permission denied"),
            std::string::npos)
      << r.output;
  r = run_command(as_user + nmt_bin() + " translate --checkpoint " + ckpt + " --input " + in +
                  " --output " + (dir / "ro/out.txt"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(
      r.output.find("nmt: error: cannot write " + (dir / "ro/out.txt") + ": Permission denied"),
      std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("loaded "), std::string::npos) << r.output;
}
