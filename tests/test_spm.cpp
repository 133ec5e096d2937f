// SentencePiece lives behind a dlopen'ed shim because its protobuf clashes with LibTorch's.
// These tests run tokenization and LibTorch in one process.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/corpus.h"
#include "helpers.h"
#include "text/spm.h"
#include "util/util.h"

using namespace nmt;

namespace {
// Trains a tiny model once for the whole suite.
const SentencePiece& tiny_model() {
  static SentencePiece sp = [] {
    std::string text;
    const char* words[] = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
    for (int i = 0; i < 400; ++i)
      text += std::string(words[i % 9]) + " hundred " + words[(i * 7) % 9] + "\n";
    SpmTrainOptions o;
    o.vocab_size = 40;
    return SentencePiece::train(text, o);
  }();
  return sp;
}
}  // namespace

TEST(SentencePiece, TokenizationAndLibTorchShareOneProcess) {
  const auto& sp = tiny_model();
  const auto ids = sp.encode("three hundred seven");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(sp.decode(ids), "three hundred seven");
  // A LibTorch op on the ids in the same process: the protobuf clash would crash before this.
  auto t = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()));
  EXPECT_EQ(t.sum().item<int64_t>(), std::accumulate(ids.begin(), ids.end(), int64_t{0}));
  EXPECT_EQ(torch::matmul(torch::ones({2, 3}), torch::ones({3, 2})).sum().item<float>(), 12.0f);
}

TEST(SentencePiece, SpecialIdsAndPieces) {
  const auto& sp = tiny_model();
  EXPECT_LE(sp.size(), 40);
  EXPECT_EQ(sp.piece(kPadId), "<pad>");
  EXPECT_EQ(sp.piece(kUnkId), "<unk>");
  EXPECT_EQ(sp.piece(kBosId), "<s>");
  EXPECT_EQ(sp.piece(kEosId), "</s>");
  EXPECT_THROW(sp.piece(100000), Error);
}

TEST(SentencePiece, BytesRoundTripAndRejectGarbage) {
  const auto& sp = tiny_model();
  const auto again = SentencePiece::from_bytes(sp.bytes());
  EXPECT_EQ(again.encode("nine hundred one"), sp.encode("nine hundred one"));
  EXPECT_THROW(SentencePiece::from_bytes("not a model"), Error);
  EXPECT_THROW(SentencePiece::from_file("/nonexistent/x.model"), Error);
}

TEST(SentencePiece, ShimIsLoadedPrivately) {
  tiny_model();
  EXPECT_NE(spm_shim_path().find("libnmt_spm.so"), std::string::npos);
  // The nmt binary itself must not link SentencePiece (or its protobuf) directly.
  const auto r = nmt_test::run_command("ldd '" + nmt_test::nmt_binary() + "'");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output.find("sentencepiece"), std::string::npos) << r.output;
}

TEST(SentencePiece, BinariesHaveNoCopyRelocations) {
  // A copy relocation of libstdc++/libc data into an executable would leave the deep-bound
  // shim with stale copies (see nmt_no_copy_relocations in CMakeLists.txt).
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (const std::string& binary : {nmt_test::nmt_binary(), self}) {
    const auto r = nmt_test::run_command("readelf -rW '" + binary + "'");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("R_X86_64_"), std::string::npos) << "no relocations listed";
    EXPECT_EQ(r.output.find("R_X86_64_COPY"), std::string::npos) << binary;
  }
}

TEST(SentencePiece, TrainingRefusesNoTextAndBadOptions) {
  SpmTrainOptions o;
  EXPECT_THROW(SentencePiece::train("", o), Error);
  o.model_type = "no-such-type";
  EXPECT_THROW(SentencePiece::train("a b c\n", o), Error);
}

TEST(SentencePiece, LoaderRefusesCopyRelocatedExecutables) {
  const auto elf = nmt_test::run_command("readelf -rW '" NMT_PIE_PROBE "'");
  ASSERT_NE(elf.output.find("R_X86_64_COPY"), std::string::npos)
      << "the probe was meant to have copy relocations";
  const auto r = nmt_test::run_command("'" NMT_PIE_PROBE "'");
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find("copy-relocates"), std::string::npos) << r.output;
}
