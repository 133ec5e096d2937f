// The generic (ATen) paths that CUDA runs, against the fused CPU kernels: dropout, attention,
// linear layers, bf16 products and rounding, the loss.
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
#include "corpus_helpers.h"
#include "data/tensors.h"
#include "helpers.h"
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


// The ATen path computes the fused kernels' function: the same mask bits, so the same values
// and gradients, for dropout and ReLU + dropout, at odd sizes and both hash halves.
TEST(GenericPath, DropoutEqualsTheFusedKernel) {
  for (const double p : {0.1, 0.3, 0.5}) {
    for (const int64_t cols : {1, 7, 129}) {
      SCOPED_TRACE("p " + std::to_string(p) + " cols " + std::to_string(cols));
      torch::manual_seed(static_cast<uint64_t>(cols));
      const auto base = torch::randn({33, cols});
      const auto g = torch::randn({33, cols});
      const uint64_t key = 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(cols + 1);
      auto a = base.clone().requires_grad_(true), b = base.clone().requires_grad_(true);
      const auto fused = dropout_fused(a, p, key);
      const auto aten = dropout_aten(b, p, key);
      EXPECT_TRUE(torch::equal(fused, aten));
      fused.backward(g);
      aten.backward(g);
      EXPECT_TRUE(torch::equal(a.grad(), b.grad()));
      // The mask really drops at rate p and keeps the rest scaled.
      EXPECT_TRUE(torch::equal(dropout_keep(base.numel(), p, key, torch::kCPU).view(base.sizes()),
                               dropout_mask(base.sizes(), p, key).ne(0)));

      auto c = base.clone().requires_grad_(true), d = base.clone().requires_grad_(true);
      const auto relu_fused = relu_dropout_fused(c, p, key);
      const auto relu_aten = relu_dropout_aten(d, p, key);
      EXPECT_TRUE(torch::equal(relu_fused, relu_aten));
      relu_fused.backward(g);
      relu_aten.backward(g);
      EXPECT_TRUE(torch::equal(c.grad(), d.grad()));
    }
  }
  // A large tensor: the fused kernel splits it across threads, the hash must not care.
  const auto big = torch::randn({3, 70001});
  EXPECT_TRUE(torch::equal(dropout_fused(big, 0.1, 77), dropout_aten(big, 0.1, 77)));
  // Every length up to a few vectors, and around a thread chunk (2^14 pairs): the mask loop's
  // vector body (the CPU's AVX-512 or AVX2 clone), its remainder and the odd last element.
  std::vector<int64_t> sizes(70);
  std::iota(sizes.begin(), sizes.end(), 1);
  for (const int64_t n : {32767, 32768, 32769, 65537}) sizes.push_back(n);
  // The ReLU + dropout gradient's loop likewise (its chunks are 2^15 elements).
  for (const int64_t n : sizes) {
    const auto x = torch::randn({n});
    EXPECT_TRUE(torch::equal(dropout_fused(x, 0.3, 1234), dropout_aten(x, 0.3, 1234))) << n;
    const auto g = torch::randn({n});
    auto c = x.clone().requires_grad_(true), d = x.clone().requires_grad_(true);
    relu_dropout_fused(c, 0.3, 1234).backward(g);
    relu_dropout_aten(d, 0.3, 1234).backward(g);
    EXPECT_TRUE(torch::equal(c.grad(), d.grad())) << n;
  }
}

// The factors a kernel draws for a slice of a mask, at any start and length, are the mask's own.
TEST(GenericPath, DropoutFactorsAreSlicesOfTheMask) {
  const auto mask = dropout_mask({101}, 0.3, 99);
  for (const int64_t first : {0, 1, 2, 33, 100})
    for (const int64_t count : {1, 2, 7, 16, 33}) {
      const int64_t n = std::min<int64_t>(count, 101 - first);
      std::vector<float> f(n);
      dropout_factors(f.data(), first, n, 0.3, 99);
      EXPECT_TRUE(torch::equal(torch::from_blob(f.data(), {n}), mask.narrow(0, first, n)))
          << first << " " << n;
    }
}

// The fused CPU attention equals the ATen path (what CUDA runs) in values and in the gradients of
// the projections: self-attention with a causal or a key-padding bias, cross-attention with a
// key-padding bias, with and without dropout (the same mask by the key), odd block sizes (the
// mask's hash pairs straddle blocks), one position.
TEST(GenericPath, AttentionEqualsTheFusedKernel) {
#ifndef INTRA_OP_PARALLEL
  // at::parallel_for is a header template: without OpenMP in this build, nmt's CPU kernels
  // (dropout, loss, attention) would silently run on one thread.
  if (!torch::cuda::is_available()) ADD_FAILURE() << "built without OpenMP: kernels run serially";
#endif
  const int64_t B = 3, heads = 2, d = 16;
  torch::manual_seed(5);
  for (const bool cross : {false, true})
    for (const int64_t T : {1, 5, 7})
      for (const double p : {0.0, 0.3})
        for (const bool causal : {false, true}) {
          if (cross && causal) continue;
          SCOPED_TRACE(std::string(cross ? "cross" : "self") + " T " + std::to_string(T) + " p " +
                       std::to_string(p) + (causal ? " causal" : " padding"));
          const int64_t Tk = cross ? T + 2 : T;
          const auto q0 = torch::randn({B, T, cross ? d : 3 * d});
          const auto kv0 = cross ? torch::randn({B, Tk, 2 * d}) : torch::Tensor();
          torch::Tensor bias;
          if (causal) {
            bias = mask_to_bias(causal_mask(T));
          } else {
            auto blocked = torch::zeros({B, Tk}, torch::kBool);
            if (Tk > 1) blocked[1][Tk - 1] = true;  // a padded key, never all of them
            bias = mask_to_bias(blocked).view({B, 1, 1, Tk});
          }
          const uint64_t key = 0xABCDEF12345ULL + static_cast<uint64_t>(T);
          auto qa = q0.clone().requires_grad_(true), qf = q0.clone().requires_grad_(true);
          auto kva = cross ? kv0.clone().requires_grad_(true) : torch::Tensor();
          auto kvf = cross ? kv0.clone().requires_grad_(true) : torch::Tensor();
          torch::Tensor aten;
          if (cross) {
            const auto k_v = split_heads(kva, 2, heads);
            aten = attention_aten(split_heads(qa, 1, heads)[0], k_v[0], k_v[1], bias, p, key);
          } else {
            const auto qkv = split_heads(qa, 3, heads);
            aten = attention_aten(qkv[0], qkv[1], qkv[2], bias, p, key);
          }
          const auto fused = attention_fused(qf, kvf, heads, bias, p, key);
          ASSERT_EQ(fused.sizes(), aten.sizes());
          EXPECT_TRUE(torch::allclose(fused, aten, 1e-5, 1e-6))
              << (fused - aten).abs().max().item<float>();
          const auto g = torch::randn(aten.sizes());
          aten.backward(g);
          fused.backward(g);
          EXPECT_TRUE(torch::allclose(qf.grad(), qa.grad(), 1e-4, 1e-5))
              << (qf.grad() - qa.grad()).abs().max().item<float>();
          if (cross)
            EXPECT_TRUE(torch::allclose(kvf.grad(), kva.grad(), 1e-4, 1e-5))
                << (kvf.grad() - kva.grad()).abs().max().item<float>();
          // Without gradients the kernel gives the same values.
          torch::NoGradGuard no_grad;
          EXPECT_TRUE(torch::equal(attention_fused(q0, kv0, heads, bias, p, key), fused.detach()));
        }
  // The blocks run in parallel; each is computed by one thread, so the thread count changes no
  // bit.
  const auto qkv = torch::randn({16, 9, 3 * d}, torch::requires_grad());
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  const auto one = attention_fused(qkv, torch::Tensor(), heads, torch::Tensor(), 0.2, 3);
  one.sum().backward();
  const auto grad_one = qkv.grad().clone();
  qkv.mutable_grad().zero_();
  torch::set_num_threads(2);
  const auto two = attention_fused(qkv, torch::Tensor(), heads, torch::Tensor(), 0.2, 3);
  two.sum().backward();
  torch::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one, two));
  EXPECT_TRUE(torch::equal(grad_one, qkv.grad()));
}

// The decoding steps' attention: the CPU kernel (plain tensors) against the ATen form that other
// devices run (taken here because q requires a gradient), and against attention_aten on the
// gathered keys and values. Head size 20 crosses the kernel's 16-wide dot products.
TEST(GenericPath, StepAttentionEqualsTheKernel) {
  const int64_t N = 6, heads = 2, d = 40, M = 30, T = 7;
  torch::manual_seed(9);
  const auto qkv = torch::randn({N, 3 * d});
  const auto q = qkv.narrow(1, 0, d);  // strided rows, as the fused projection gives them
  const auto table = torch::randn({M, 2 * d});
  const auto slots = torch::randint(0, M, {N, T}, torch::kLong);
  const auto fused = attention_step_gather(q, table, slots, heads);
  const auto generic = attention_step_gather(q.clone().requires_grad_(true), table, slots, heads);
  EXPECT_TRUE(torch::allclose(fused, generic.detach(), 1e-5, 1e-6))
      << (fused - generic).abs().max().item<float>();
  const auto rows = table.index_select(0, slots.view(-1)).view({N, T, 2 * d});
  const auto k_v = split_heads(rows, 2, heads);
  const auto direct = attention_aten(q.reshape({N, 1, heads, d / heads}).transpose(1, 2), k_v[0],
                                     k_v[1], torch::Tensor(), 0.0, 0)
                          .view({N, d});
  EXPECT_TRUE(torch::allclose(fused, direct, 1e-5, 1e-6));
  EXPECT_THROW(attention_step_gather(q, table, slots + M, heads), c10::Error);

  // Cross-attention: 3 sentences of 2 rows each, one padded key in sentence 1.
  const int64_t B = 3, S = 5;
  const auto memory = torch::randn({B, S, 2 * d});
  auto blocked = torch::zeros({B, S}, torch::kBool);
  blocked[1][S - 1] = true;
  const auto bias = mask_to_bias(blocked).view({B, 1, 1, S});
  const auto cross = attention_step_grouped(q, memory, bias, heads);
  const auto cross_generic =
      attention_step_grouped(q.clone().requires_grad_(true), memory, bias, heads);
  EXPECT_TRUE(torch::allclose(cross, cross_generic.detach(), 1e-5, 1e-6))
      << (cross - cross_generic).abs().max().item<float>();
  const auto repeated = split_heads(memory.repeat_interleave(N / B, 0), 2, heads);
  const auto cross_direct =
      attention_aten(q.reshape({N, 1, heads, d / heads}).transpose(1, 2), repeated[0], repeated[1],
                     bias.repeat_interleave(N / B, 0), 0.0, 0)
          .view({N, d});
  EXPECT_TRUE(torch::allclose(cross, cross_direct, 1e-5, 1e-6));
  torch::Tensor weights;
  const auto with_weights = attention_step_grouped(q, memory, bias, heads, &weights);
  EXPECT_TRUE(torch::allclose(cross, with_weights, 1e-5, 1e-6));
  ASSERT_EQ(weights.sizes(), (std::vector<int64_t>{N, heads, 1, S}));
  EXPECT_EQ(weights[2][0][0][S - 1].item<float>(), 0.0f);  // row 2 is sentence 1's: padded key
}

TEST(GenericPath, DropoutOnLowPrecisionRoundsOnce) {
  const auto x = torch::randn({8, 40});
  const auto y = dropout_aten(x.to(torch::kBFloat16), 0.25, 5);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  // x * keep * (1 / 0.75) in float, rounded to bfloat16 once: as torch's own dropout.
  const auto expected =
      (x.to(torch::kBFloat16).to(torch::kFloat) *
       dropout_keep(x.numel(), 0.25, 5, torch::kCPU).view(x.sizes()) * (1.0 / 0.75))
          .to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(y, expected));
}

// The fused loss's exp: within 2e-7 relative of std::exp over the range softmax meets (x <= 0
// after the row maximum is subtracted) and beyond, exact at 0, clamped far below.
// A float CPU linear layer takes oneDNN for its forward and input-gradient products where the
// rule says (inner size <= 512) and the BLAS for the rest; values and all three gradients equal
// LibTorch's own linear (all BLAS) within rounding: forward on oneDNN and the input gradient on
// the BLAS (256 -> 1024), the reverse (1024 -> 256), both (256 -> 768), with and without bias,
// 1-, 2- and 3-dimensional and non-contiguous inputs, one row, an input without gradient.
TEST(GenericPath, LinearEqualsLibTorchsLinear) {
  // Debian's LibTorch loads oneDNN (libdnnl.so.2); pip's CUDA builds link it statically.
  if (!torch::cuda::is_available() && std::getenv("NMT_GEMM") == nullptr) {
    EXPECT_TRUE(nmt::onednn_takes(3920, 768, 256)) << nmt::gemm_policy_description();
    EXPECT_FALSE(nmt::onednn_takes(3920, 256, 1024));
    EXPECT_NE(nmt::gemm_policy_description().find("oneDNN"), std::string::npos);
  }
  torch::manual_seed(11);
  struct Case {
    std::vector<int64_t> x_shape;
    int64_t out;
    bool bias, transposed, x_grad;
  };
  const std::vector<Case> cases = {
      {{7, 5, 256}, 1024, true, false, true}, {{35, 1024}, 256, true, false, true},
      {{6, 4, 256}, 768, false, false, true}, {{1, 256}, 512, true, false, true},
      {{256}, 300, true, false, true},        {{9, 4, 256}, 256, true, true, true},
      {{33, 256}, 1024, false, false, false}, {{3, 2, 40}, 24, true, false, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("x " + std::to_string(c.x_shape.back()) + " -> " + std::to_string(c.out) +
                 (c.bias ? " bias" : "") + (c.transposed ? " transposed" : "") + " dims " +
                 std::to_string(c.x_shape.size()));
    const int64_t in = c.x_shape.back();
    auto x0 = torch::randn(c.x_shape);
    if (c.transposed) x0 = x0.transpose(0, 1).contiguous().transpose(0, 1);  // same values
    const auto w0 = torch::randn({c.out, in}) / std::sqrt(static_cast<double>(in));
    const auto b0 = c.bias ? torch::randn({c.out}) : torch::Tensor();
    auto copy = [](const torch::Tensor& t, bool grad) {
      return t.defined() ? t.detach().clone().requires_grad_(grad) : torch::Tensor();
    };
    auto xa = copy(x0, c.x_grad), wa = copy(w0, true), ba = copy(b0, true);
    auto xb = c.transposed ? x0.detach().requires_grad_(c.x_grad) : copy(x0, c.x_grad);
    auto wb = copy(w0, true), bb = copy(b0, true);
    const auto ya = torch::nn::functional::linear(xa, wa, ba);
    const auto yb = nmt::linear(xb, wb, bb);
    ASSERT_EQ(yb.sizes(), ya.sizes());
    EXPECT_TRUE(torch::allclose(yb, ya, 1e-5, 1e-5)) << (yb - ya).abs().max().item<float>();
    const auto g = torch::randn(ya.sizes());
    ya.backward(g);
    yb.backward(g);
    if (c.x_grad) {
      ASSERT_EQ(xb.grad().sizes(), xa.grad().sizes());
      EXPECT_TRUE(torch::allclose(xb.grad(), xa.grad(), 1e-5, 1e-5))
          << (xb.grad() - xa.grad()).abs().max().item<float>();
    }
    EXPECT_TRUE(torch::allclose(wb.grad(), wa.grad(), 1e-5, 1e-4))
        << (wb.grad() - wa.grad()).abs().max().item<float>();
    if (c.bias)
      EXPECT_TRUE(torch::allclose(bb.grad(), ba.grad(), 1e-5, 1e-4))
          << (bb.grad() - ba.grad()).abs().max().item<float>();
    // The inputs are left as they were (one row once accumulated into the bias itself).
    EXPECT_TRUE(torch::equal(xb, x0));
    EXPECT_TRUE(torch::equal(wb, w0));
    if (c.bias) EXPECT_TRUE(torch::equal(bb, b0));
    // The same call gives the same bits again (resume is bit-exact), and without gradients too.
    // Not for a transposed input where LibTorch's own linear runs: LibTorch 2.x's matmul then
    // takes another product (bmm or mm) when the input needs no gradient, and the BLAS inside pip's
    // LibTorch rounds the two differently.
    EXPECT_TRUE(torch::equal(nmt::linear(xb, wb, bb), yb));
    torch::NoGradGuard no_grad;
    if (!c.transposed || TORCH_VERSION_MAJOR < 2)
      EXPECT_TRUE(torch::equal(nmt::linear(x0, w0, b0), yb.detach()));
    else
      EXPECT_TRUE(torch::allclose(nmt::linear(x0, w0, b0), yb.detach(), 1e-5, 1e-5));
  }
}

// Precision bf16 on the CPU: each of a layer's three products equals the float64 product of the
// bfloat16-rounded operands (x, W, the output gradient), up to float accumulation; the bias and
// its gradient stay float. Backward follows the forward's precision even when it runs after the
// guard is gone (the trainer's backward does), and the same call gives the same bits again.
TEST(GenericPath, Bf16ProductsEqualProductsOfRoundedOperands) {
  if (!nmt::have_bf16_gemm()) GTEST_SKIP() << nmt::bf16_gemm_missing();
  torch::manual_seed(12);
  auto rounded = [](const torch::Tensor& t) {
    return t.detach().to(torch::kBFloat16).to(torch::kDouble);
  };
  auto expect_close = [](const torch::Tensor& got, const torch::Tensor& want) {
    ASSERT_EQ(got.scalar_type(), torch::kFloat);
    ASSERT_EQ(got.sizes(), want.sizes());
    const double err = (got.to(torch::kDouble) - want).abs().max().item<double>();
    EXPECT_LT(err, 1e-5 * (1 + want.abs().max().item<double>())) << err;
  };
  struct Case {
    std::vector<int64_t> x_shape;
    int64_t out;
    bool bias;
  };
  for (const Case& c : std::vector<Case>{{{7, 5, 256}, 1024, true},
                                         {{35, 1024}, 256, false},
                                         {{1, 40}, 24, true},
                                         {{3, 2, 256}, 8000, true},
                                         {{2, 65, 64}, 48, true}}) {
    SCOPED_TRACE(std::to_string(c.x_shape.back()) + " -> " + std::to_string(c.out));
    const int64_t in = c.x_shape.back();
    auto x = torch::randn(c.x_shape).requires_grad_(true);
    auto w = (torch::randn({c.out, in}) / std::sqrt(static_cast<double>(in))).requires_grad_(true);
    auto b = c.bias ? torch::randn({c.out}).requires_grad_(true) : torch::Tensor();
    torch::Tensor y;
    {
      const nmt::Bf16ProductsGuard guard;
      EXPECT_TRUE(nmt::bf16_products());
      y = nmt::linear(x, w, b);
    }
    EXPECT_FALSE(nmt::bf16_products());
    auto want = torch::matmul(rounded(x), rounded(w).t());
    if (c.bias) want = want + b.detach().to(torch::kDouble);
    expect_close(y, want);
    const auto g = torch::randn(y.sizes());
    y.backward(g);
    const auto g2 = rounded(g).reshape({-1, c.out});
    expect_close(x.grad(), torch::matmul(g2, rounded(w)).reshape(x.sizes()));
    expect_close(w.grad(), torch::matmul(g2.t(), rounded(x).reshape({-1, in})));
    if (c.bias) expect_close(b.grad(), g.reshape({-1, c.out}).to(torch::kDouble).sum(0));
    // Float products differ from these: the guard is what chose bf16.
    EXPECT_FALSE(torch::equal(nmt::linear(x, w, b), y));
    torch::NoGradGuard no_grad;
    const nmt::Bf16ProductsGuard guard;
    EXPECT_TRUE(torch::equal(nmt::linear(x, w, b), y.detach()));
  }
}

// nmt's bfloat16 rounding gives ATen's bits for every finite float (ties to even, values that
// round up to infinity, denormals, signed zeros) and a NaN for a NaN. The column sums that come
// with it are float64's within rounding, and the same bits at 1 and 2 threads.
TEST(GenericPath, Bf16RoundingAndColumnSums) {
  const float tie_down = 1.0f + 1.0f / 256, tie_up = 1.0f + 3.0f / 256;  // halfway: to even
  std::vector<float> special = {0.0f,     -0.0f,     1.0f,       -1.0f,    tie_down, tie_up,
                                -tie_up,  FLT_MAX,   -FLT_MAX,   FLT_MIN,  1e-40f,   -1e-45f,
                                INFINITY, -INFINITY, 3.3961e38f, 65504.0f, 1.0f / 3, -2.5e-8f};
  auto t = torch::cat({torch::tensor(special),
                       torch::randint(std::numeric_limits<int32_t>::min(),
                                      std::numeric_limits<int32_t>::max(), {200000}, torch::kInt)
                           .view(torch::kFloat),
                       torch::randn({70001}) * torch::exp(torch::randn({70001}) * 8)});
  t = torch::where(torch::isnan(t), torch::zeros_like(t), t);
  const auto mine = nmt::to_bf16(t), aten = t.to(torch::kBFloat16);
  ASSERT_EQ(mine.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(mine.view(torch::kShort), aten.view(torch::kShort)));
  EXPECT_EQ(mine[4].item<float>(), 1.0f);
  EXPECT_EQ(mine[5].item<float>(), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isinf(mine[7].item<float>()));  // FLT_MAX is nearer 2^128 than bf16's largest
  EXPECT_TRUE(std::isnan(nmt::to_bf16(torch::full({3}, NAN))[1].item<float>()));

  for (const int64_t rows : {1, 64, 300}) {
    const auto g = torch::randn({rows, 37}) * 3;
    torch::Tensor sums1, sums2;
    const int threads = torch::get_num_threads();
    torch::set_num_threads(1);
    const auto copy1 = nmt::to_bf16_with_column_sums(g, &sums1);
    torch::set_num_threads(2);
    const auto copy2 = nmt::to_bf16_with_column_sums(g, &sums2);
    torch::set_num_threads(threads);
    EXPECT_TRUE(
        torch::equal(copy1.view(torch::kShort), g.to(torch::kBFloat16).view(torch::kShort)));
    EXPECT_TRUE(torch::equal(copy1.view(torch::kShort), copy2.view(torch::kShort)));
    EXPECT_TRUE(torch::equal(sums1, sums2)) << rows;
    const auto want = g.to(torch::kDouble).sum(0);
    EXPECT_LT((sums1.to(torch::kDouble) - want).abs().max().item<double>(), 1e-5 * rows) << rows;
  }
}

TEST(GenericPath, ExpApproximation) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f)
    worst = std::max(worst, std::abs(nmt::exp_approx(x) / std::exp(static_cast<double>(x)) - 1));
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(nmt::exp_approx(0.0f), 1.0f);
  EXPECT_GT(nmt::exp_approx(-1000.0f), 0.0f);
  EXPECT_LT(nmt::exp_approx(-1000.0f), 1e-37f);
  EXPECT_FALSE(std::isnan(nmt::exp_approx(-INFINITY)));
}

// The label-smoothed loss through ATen ops (autograd) equals the fused node, value and gradient,
// with ignored rows.
TEST(GenericPath, LossEqualsTheFusedNode) {
  torch::manual_seed(8);
  for (const double eps : {0.0, 0.1, 0.3}) {
    const auto base = torch::randn({17, 50}) * 3;
    auto target = torch::randint(0, 50, {17}, torch::kLong);
    target[4] = 0;
    target[9] = 0;
    auto a = base.clone().requires_grad_(true), b = base.clone().requires_grad_(true);
    const auto fused = label_smoothed_loss_fused(a, target, eps, 0);
    const auto aten = label_smoothed_loss_aten(b, target, eps, 0);
    EXPECT_NEAR(fused.loss.item<double>(), aten.loss.item<double>(), 1e-4);
    EXPECT_NEAR(fused.nll.item<double>(), aten.nll.item<double>(), 1e-4);
    (fused.loss * 0.7).backward();
    (aten.loss * 0.7).backward();
    EXPECT_TRUE(torch::allclose(a.grad(), b.grad(), 1e-5, 1e-6))
        << "eps " << eps << " max diff " << (a.grad() - b.grad()).abs().max().item<float>();
    EXPECT_EQ(b.grad()[4].abs().sum().item<float>(), 0.0f);  // ignored rows get nothing
  }
  // Wide logits and a real vocabulary's width: the fused kernel's vector body and remainder
  // (V = 8003), its exp over a range of 60, rows of equal logits.
  for (const int64_t V : {8003, 16, 1}) {
    SCOPED_TRACE("V " + std::to_string(V));
    const auto base = torch::randn({6, V}) * 10;
    base[2].fill_(1.5);
    const auto target = torch::randint(0, V, {6}, torch::kLong);
    auto a = base.clone().requires_grad_(true), b = base.clone().requires_grad_(true);
    const auto fused = label_smoothed_loss_fused(a, target, 0.1, -1);
    const auto aten = label_smoothed_loss_aten(b, target, 0.1, -1);
    EXPECT_NEAR(fused.loss.item<double>(), aten.loss.item<double>(),
                1e-5 * std::abs(aten.loss.item<double>()));
    EXPECT_NEAR(fused.nll.item<double>(), aten.nll.item<double>(),
                1e-5 * std::abs(aten.nll.item<double>()));
    fused.loss.backward();
    aten.loss.backward();
    EXPECT_TRUE(torch::allclose(a.grad(), b.grad(), 1e-4, 1e-7))
        << "max diff " << (a.grad() - b.grad()).abs().max().item<float>();
  }
  // A NaN logit makes the loss NaN (the trainer's non-finite check must see it), not ignored
  // by a maximum.
  auto poisoned = torch::randn({3, 40});
  poisoned[1][7] = NAN;
  EXPECT_TRUE(std::isnan(label_smoothed_loss_fused(poisoned.requires_grad_(true),
                                                   torch::tensor({1, 2, 3}, torch::kLong), 0.1, 0)
                             .loss.item<float>()));
  // A target outside the vocabulary is an error, not a read past the row.
  EXPECT_THROW(label_smoothed_loss_fused(torch::randn({2, 5}, torch::requires_grad()),
                                         torch::tensor({1, 5}, torch::kLong), 0.1, 0),
               c10::Error);
  // Low-precision logits are scored in float32.
  const auto logits = torch::randn({5, 11});
  const auto target = torch::randint(1, 11, {5}, torch::kLong);
  const auto low = label_smoothed_loss(logits.to(torch::kBFloat16), target, 0.1, 0);
  EXPECT_EQ(low.loss.scalar_type(), torch::kFloat);
  EXPECT_NEAR(low.loss.item<double>(),
              label_smoothed_loss(logits.to(torch::kBFloat16).to(torch::kFloat), target, 0.1, 0)
                  .loss.item<double>(),
              1e-5);
}
