// SentencePiece lives behind a dlopen'ed shim because its protobuf clashes with LibTorch's.
// These tests run tokenization and LibTorch in one process.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "helpers.h"
#include "text/spm.h"
#include "util/util.h"

using namespace nmt;

namespace {
// Trains a tiny model once for the whole suite.
const SentencePiece& tiny_model() {
  static nmt_test::TempDir dir;
  static SentencePiece sp = [] {
    std::string text;
    const char* words[] = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
    for (int i = 0; i < 400; ++i)
      text += std::string(words[i % 9]) + " hundred " + words[(i * 7) % 9] + "\n";
    nmt_test::write_text(dir / "text.txt", text);
    SpmTrainOptions o;
    o.inputs = {dir / "text.txt"};
    o.model_prefix = dir / "tiny";
    o.vocab_size = 40;
    return SentencePiece::from_file(SentencePiece::train(o));
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
