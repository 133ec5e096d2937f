// Devices and precision, masks, and the model interface's serialisation.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "config/config.h"
#include "config/parse.h"
#include "corpus_helpers.h"
#include "data/tensors.h"
#include "helpers.h"
#include "model_helpers.h"
#include "model/attention.h"
#include "model/device.h"
#include "model/dropout.h"
#include "model/linear.h"
#include "model/loss.h"
#include "model/seq2seq.h"
#include "text/spm.h"
#include "train/metrics_log.h"
#include "ckpt/checkpoint_state.h"
#include "train/step.h"
#include "util/blas.h"
#include "util/util.h"

using namespace nmt;
using nlohmann::json;
using nmt_test::tiny_model;


TEST(Device, NamesResolveOrFailClearly) {
  EXPECT_EQ(resolve_device("cpu", "--device"), torch::Device(torch::kCPU));
  const auto automatic = resolve_device("auto", "--device");
  EXPECT_EQ(automatic.is_cuda(), torch::cuda::is_available());
  EXPECT_EQ(describe_device(torch::kCPU), "cpu");
  try {
    resolve_device("gpu", "train.device");
    FAIL() << "gpu accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.device: unknown device \"gpu\""), std::string::npos)
        << e.what();
  }
  if (!torch::cuda::is_available()) {
    try {
      resolve_device("cuda:0", "--device");
      FAIL() << "cuda accepted without CUDA";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--device cuda:0: no CUDA device is available"),
                std::string::npos)
          << e.what();
    }
  } else {
    EXPECT_THROW(resolve_device("cuda:99", "--device"), Error);
  }
  // fp16 is CUDA autocast: refused on the CPU, naming the key. bf16 runs on a CPU with native
  // bfloat16 products, and is refused with the reason on others.
  EXPECT_EQ(resolve_precision(PrecisionSetting::kFp32, torch::kCPU, "x"), Precision::kFp32);
  try {
    resolve_precision(PrecisionSetting::kFp16, torch::kCPU, "train.precision");
    FAIL() << "fp16 accepted on the CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.precision fp16 runs on CUDA only"),
              std::string::npos)
        << e.what();
  }
  if (nmt::have_bf16_gemm()) {
    EXPECT_EQ(resolve_precision(PrecisionSetting::kBf16, torch::kCPU, "x"), Precision::kBf16);
  } else {
    try {
      resolve_precision(PrecisionSetting::kBf16, torch::kCPU, "train.precision");
      FAIL() << "bf16 accepted on a CPU without bfloat16 products";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("train.precision bf16 on the CPU multiplies in "
                                           "bfloat16, but " +
                                           nmt::bf16_gemm_missing()),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(parse_choice<PrecisionSetting>("fp8", "x"), Error);
  // auto: bf16 where the CPU multiplies bfloat16 natively, else fp32, never refused; CUDA fp32.
  const auto cpu_auto = resolve_precision(PrecisionSetting::kAuto, torch::kCPU, "x");
  EXPECT_EQ(cpu_auto, nmt::have_bf16_gemm() ? Precision::kBf16 : Precision::kFp32);
  EXPECT_EQ(resolve_precision(PrecisionSetting::kAuto, torch::Device(torch::kCUDA, 0), "x"),
            Precision::kFp32);
  EXPECT_EQ(describe_precision(PrecisionSetting::kAuto, cpu_auto, torch::kCPU),
            nmt::have_bf16_gemm() ? "bf16 (auto: this CPU multiplies bfloat16)"
                                  : "fp32 (auto: " + nmt::bf16_gemm_missing() + ")");
  EXPECT_EQ(describe_precision(PrecisionSetting::kAuto, Precision::kFp32,
                               torch::Device(torch::kCUDA, 0)),
            "fp32 (auto: float32 on CUDA)");
  EXPECT_EQ(describe_precision(PrecisionSetting::kFp32, Precision::kFp32, torch::kCPU), "fp32");
}

TEST(Device, ConfigKeysAreValidated) {
  auto error_of = [](const std::vector<std::string>& sets) -> std::string {
    try {
      parse_config(R"({"train": {"max_steps": 1}})", sets, "c.json");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of({"train.device=cuda:1"}), "");
  EXPECT_EQ(error_of({"train.device=auto"}), "");
  EXPECT_EQ(error_of({"train.device=cuda:"}),
            "train.device: must be \"auto\", \"cpu\", \"cuda\" or \"cuda:N\", got \"cuda:\"");
  EXPECT_EQ(error_of({"train.device=tpu"}),
            "train.device: must be \"auto\", \"cpu\", \"cuda\" or \"cuda:N\", got \"tpu\"");
  EXPECT_EQ(error_of({"train.precision=fp8"}),
            "train.precision: must be one of \"fp32\", \"bf16\", \"fp16\", \"auto\", got "
            "\"fp8\"");
  EXPECT_EQ(error_of({"train.precision=auto"}), "");
  EXPECT_EQ(error_of({"model.arch=lstm"}),
            "model.arch: must be one of \"transformer\", \"rnn\", got \"lstm\"");
}

// Autocast is on inside the guard only, and only for the low precisions.
TEST(Device, AutocastGuardRestoresTheState) {
  const auto mm = [] { return torch::matmul(torch::randn({2, 3}), torch::randn({3, 2})); };
  {
    const AutocastGuard none(torch::kCPU, Precision::kFp32);
    EXPECT_EQ(mm().scalar_type(), torch::kFloat);
    EXPECT_FALSE(nmt::bf16_products());
  }
  EXPECT_EQ(mm().scalar_type(), torch::kFloat);
  // bf16 on the CPU is nmt's bfloat16 products, not ATen's CPU autocast: outputs stay float.
  if (nmt::have_bf16_gemm()) {
    {
      const AutocastGuard bf16(torch::kCPU, Precision::kBf16);
      EXPECT_TRUE(nmt::bf16_products());
      EXPECT_EQ(mm().scalar_type(), torch::kFloat);
    }
    EXPECT_FALSE(nmt::bf16_products());
  }
}

TEST(Masks, MadeOnTheInputsDeviceInTheModelsDtype) {
  const auto blocked = causal_mask(3);
  const auto bias = mask_to_bias(blocked, torch::kDouble);
  EXPECT_EQ(bias.scalar_type(), torch::kDouble);
  EXPECT_EQ(bias.device(), blocked.device());
  EXPECT_EQ(bias[0][1].item<double>(), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(bias[1][0].item<double>(), 0.0);
}

// The real target positions a batch projects, computed on the host.
TEST(Masks, TargetPositionsAreTheNonPadCells) {
  Corpus c;
  c.src = {{5, 6}, {7}, {8, 9, 10}};
  c.tgt = {{11}, {12, 13, 14}, {15, 16}};
  const auto b = make_tensor_batch(c, {0, 1, 2});
  const auto flat = b.tgt_out.view(-1);
  const auto expected = flat.ne(kPadId).nonzero().view(-1);
  EXPECT_TRUE(torch::equal(b.tgt_positions, expected));
  EXPECT_EQ(b.tgt_positions.numel(), b.tgt_tokens);
  EXPECT_TRUE(to_device(b, torch::kCPU).src.is_same(b.src));
}

// model.pt holds the weights; the sinusoid table is a buffer (it follows the device) that is
// rebuilt from the config, not saved.
TEST(Seq2Seq, DerivedBuffersMoveButAreNotSaved) {
  torch::manual_seed(1);
  auto model = make_model(tiny_model(), 30, 30);
  bool found = false;
  for (const auto& b : model->named_buffers()) found |= b.key() == "sinusoids";
  EXPECT_TRUE(found);
  EXPECT_EQ(model->saved_tensors().size(), model->parameters().size());
  nmt_test::TempDir dir;
  torch::save(model, dir / "model.pt");
  torch::serialize::InputArchive archive;
  archive.load_from(dir / "model.pt");
  torch::Tensor t;
  EXPECT_FALSE(archive.try_read("sinusoids", t, /*is_buffer=*/true));

  torch::manual_seed(2);
  auto other = make_model(tiny_model(), 30, 30);
  torch::load(other, dir / "model.pt", torch::Device(torch::kCPU));
  const auto a = model->parameters(), b = other->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i]));
  EXPECT_THROW(make_model(
                   [] {
                     auto c = tiny_model();
                     c.arch = static_cast<Arch>(99);  // no such family
                     return c;
                   }(),
                   30, 30),
               Error);
}
