// The shortened quickstart model that the QuickstartRun tests share (decoding, fuzzing).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "helpers.h"

namespace nmt_test {

// The quickstart config on freshly generated number data, shortened to fit a unit-test budget.
// Trained once into the build tree and shared: ctest runs QuickstartRunSetup first (a fixture),
// and a direct run of the suite trains it when it is missing.
inline std::string shared_root() { return NMT_TEST_SHARED_DIR "/quickstart-run"; }
inline std::string shared_data() { return shared_root() + "/data"; }
inline std::string shared_run() { return shared_root() + "/run"; }
inline bool shared_run_complete() {
  return std::filesystem::exists(shared_run() + "/checkpoints/ckpt-00000500/state.json");
}

inline void train_shared_run() {
  std::filesystem::remove_all(shared_root());
  std::filesystem::create_directories(shared_root());
  const auto gen = run_command("python3 scripts/make_quickstart_data.py --out " + shared_data() +
                               " --train 30000 --valid 200 --test 300");
  ASSERT_EQ(gen.status, 0) << gen.output;
  const std::string d = shared_data();
  const auto r = run_command(
      nmt_bin() + " train --config configs/quickstart.json --run-dir " + shared_run() +
      " --set data.train_src=" + d + "/train.en --set data.train_tgt=" + d +
      "/train.de --set data.valid_src=" + d + "/valid.en --set data.valid_tgt=" + d +
      "/valid.de --set train.threads=1 --set train.max_steps=500 --set train.valid_every=250"
      " --set train.save_every=250 --set train.log_every=50");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_TRUE(shared_run_complete());
}

class QuickstartRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!shared_run_complete()) train_shared_run();
  }
  static std::string data() { return shared_data(); }
  static std::string run() { return shared_run(); }
  // Outputs go to a directory of each test's own, so tests can run in parallel.
  std::string path(const std::string& name) const { return tmp_ / name; }
  static std::string translate(const std::string& args, const std::string& checkpoint = "") {
    return nmt_bin() + " translate --checkpoint " + (checkpoint.empty() ? run() : checkpoint) +
           " --threads 1 " + args;
  }

  nmt_test::TempDir tmp_;
};
}  // namespace nmt_test
