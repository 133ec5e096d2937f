#include "model/attention.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/dropout.h"
#include "util/blas.h"
#include "util/fast_math.h"
#include "util/util.h"

namespace nmt {

namespace {

// Sizes of one attention call.
struct Geometry {
  int64_t B, heads, Tq, Tk, dh;
  int64_t d() const { return heads * dh; }
  int64_t block() const { return Tq * Tk; }  // one (sentence, head) block of weights
};

// One projection's heads in place: head h of position t of sentence b starts at
// data + b * batch + t * row + h * dh, its dh elements contiguous.
struct Heads {
  float* data;
  int64_t batch, row;
  float* at(int64_t b, int64_t h, int64_t dh) const { return data + b * batch + h * dh; }
};

struct Operands {
  Heads q, k, v;
};

// The bias expanded to [B, heads, Tq, Tk]: element strides, 0 along broadcast dimensions.
struct Bias {
  const float* data = nullptr;
  int64_t sb = 0, sh = 0, sq = 0, sk = 0;
  const float* block(int64_t b, int64_t h) const {
    return data != nullptr ? data + b * sb + h * sh : nullptr;
  }
};

// Self-attention: q is [B, T, 3d] (q | k | v); cross-attention: q [B, Tq, d], kv [B, Tk, 2d]
// (k | v). Also for the gradients, which have their inputs' layouts.
Operands operands(const torch::Tensor& q, const torch::Tensor& kv, const Geometry& g) {
  const int64_t d = g.d();
  float* pq = q.data_ptr<float>();
  if (!kv.defined()) {
    const int64_t row = 3 * d, batch = g.Tq * row;
    return {{pq, batch, row}, {pq + d, batch, row}, {pq + 2 * d, batch, row}};
  }
  float* pkv = kv.data_ptr<float>();
  const int64_t row = 2 * d, batch = g.Tk * row;
  return {{pq, g.Tq * d, d}, {pkv, batch, row}, {pkv + d, batch, row}};
}

Geometry geometry(const torch::Tensor& q, const torch::Tensor& kv, int64_t heads) {
  TORCH_CHECK(heads > 0 && q.dim() == 3, "attention_fused: q [B, T, width] expected, got ",
              q.sizes());
  const int64_t parts = kv.defined() ? 1 : 3;
  const int64_t d = q.size(2) / parts;
  TORCH_CHECK(q.size(2) == parts * d && d % heads == 0, "attention_fused: q's width ", q.size(2),
              " is not ", parts, " x heads (", heads, ") x head size");
  Geometry g{q.size(0), heads, q.size(1), q.size(1), d / heads};
  if (kv.defined()) {
    TORCH_CHECK(kv.dim() == 3 && kv.size(0) == g.B && kv.size(2) == 2 * d, "attention_fused: kv [",
                g.B, ", Tk, ", 2 * d, "] expected, got ", kv.sizes());
    g.Tk = kv.size(1);
  }
  return g;
}

// Sums and maxima over 8 lanes: GCC vectorizes these without reordering one float reduction.
constexpr int64_t kLanes = 8;

// Each row of a block of scores [rows, cols]: += bias row (bias[i * bias_row + j * bias_col]),
// then softmax in place. exp of a shifted score below -87.3 is taken as 0, so masked keys
// (bias -inf) get exactly 0, as ATen's softmax gives them.
NMT_CPU_CLONES
void bias_softmax_rows(float* __restrict s, int64_t rows, int64_t cols, const float* bias,
                       int64_t bias_row, int64_t bias_col) {
  for (int64_t i = 0; i < rows; ++i) {
    float* r = s + i * cols;
    if (bias != nullptr) {
      const float* br = bias + i * bias_row;
      for (int64_t j = 0; j < cols; ++j) r[j] += br[j * bias_col];
    }
    const float max = lanes_max<kLanes>(r, cols);
    for (int64_t j = 0; j < cols; ++j) {
      const float x = r[j] - max;
      r[j] = x < -87.3f ? 0.0f : exp_poly(x);
    }
    const float inv = 1.0f / lanes_sum<kLanes>(r, cols);
    for (int64_t j = 0; j < cols; ++j) r[j] *= inv;
  }
}

// Softmax backward in place, row by row: dp becomes p * (dp - sum_j dp_j p_j).
NMT_CPU_CLONES
void softmax_backward_rows(float* __restrict dp, const float* __restrict p, int64_t rows,
                           int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    float* g = dp + i * cols;
    const float* y = p + i * cols;
    const float dot = lanes_dot<kLanes>(g, y, cols);
    for (int64_t j = 0; j < cols; ++j) g[j] = y[j] * (g[j] - dot);
  }
}

NMT_CPU_CLONES
void multiply(float* dst, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] * b[i];
}

// A thread's scratch for its blocks: three blocks of weights.
struct Scratch {
  float *work, *factors, *dropped;
};

// body(b, h, bh, scratch) for every (sentence, head) block bh = b * heads + h, the blocks split
// across threads.
template <typename Body>
void for_each_block(const Geometry& g, const Body& body) {
  at::parallel_for(0, g.B * g.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(static_cast<size_t>(3 * g.block()));
    const Scratch s{buffer.data(), buffer.data() + g.block(), buffer.data() + 2 * g.block()};
    for (int64_t bh = begin; bh < end; ++bh) body(bh / g.heads, bh % g.heads, bh, s);
  });
}

// Block bh's weights w after dropout: w itself when p == 0, else w times the mask, in
// s.dropped (the mask's factors left in s.factors).
const float* drop_block(const float* w, int64_t bh, const Geometry& g, double p, uint64_t key,
                        const Scratch& s) {
  if (p == 0.0) return w;
  dropout_factors(s.factors, bh * g.block(), g.block(), p, key);
  multiply(s.dropped, w, s.factors, g.block());
  return s.dropped;
}

// Forward of all blocks. probs (the softmax, [B, heads, Tq, Tk]) is kept for backward when
// given. out: the context [B, Tq, d].
void forward_blocks(const Geometry& g, const Operands& in, const Bias& bias, float scale, double p,
                    uint64_t key, float* probs, float* out) {
  const int64_t d = g.d();
  for_each_block(g, [&](int64_t b, int64_t h, int64_t bh, const Scratch& s) {
    float* w = probs != nullptr ? probs + bh * g.block() : s.work;
    sgemm_row_major(false, true, g.Tq, g.Tk, g.dh, scale, in.q.at(b, h, g.dh), in.q.row,
                    in.k.at(b, h, g.dh), in.k.row, 0.0f, w, g.Tk);
    bias_softmax_rows(w, g.Tq, g.Tk, bias.block(b, h), bias.sq, bias.sk);
    sgemm_row_major(false, false, g.Tq, g.dh, g.Tk, 1.0f, drop_block(w, bh, g, p, key, s), g.Tk,
                    in.v.at(b, h, g.dh), in.v.row, 0.0f, out + b * g.Tq * d + h * g.dh, d);
  });
}

// Backward of all blocks: gout is d(loss)/d(context) [B, Tq, d]; writes every element of the
// gradients (their blocks tile them).
void backward_blocks(const Geometry& g, const Operands& in, const Operands& grad,
                     const float* probs, const float* gout, float scale, double p, uint64_t key) {
  const int64_t d = g.d();
  for_each_block(g, [&](int64_t b, int64_t h, int64_t bh, const Scratch& s) {
    const float* w = probs + bh * g.block();
    const float* go = gout + b * g.Tq * d + h * g.dh;
    float* dw = s.work;
    // d(dropped weights) = gout v^T
    sgemm_row_major(false, true, g.Tq, g.Tk, g.dh, 1.0f, go, d, in.v.at(b, h, g.dh), in.v.row, 0.0f,
                    dw, g.Tk);
    const float* dropped = drop_block(w, bh, g, p, key, s);
    if (p > 0.0) multiply(dw, dw, s.factors, g.block());  // d(weights)
    // dv = (dropped weights)^T gout
    sgemm_row_major(true, false, g.Tk, g.dh, g.Tq, 1.0f, dropped, g.Tk, go, d, 0.0f,
                    grad.v.at(b, h, g.dh), grad.v.row);
    softmax_backward_rows(dw, w, g.Tq, g.Tk);  // dw: d(scores)
    sgemm_row_major(false, false, g.Tq, g.dh, g.Tk, scale, dw, g.Tk, in.k.at(b, h, g.dh), in.k.row,
                    0.0f, grad.q.at(b, h, g.dh), grad.q.row);
    sgemm_row_major(true, false, g.Tk, g.dh, g.Tq, scale, dw, g.Tk, in.q.at(b, h, g.dh), in.q.row,
                    0.0f, grad.k.at(b, h, g.dh), grad.k.row);
  });
}

float scale_of(const Geometry& g) { return static_cast<float>(1.0 / std::sqrt(double(g.dh))); }

// Runs the forward kernel; `probs`, when given, receives the softmax for backward.
torch::Tensor run_forward(const torch::Tensor& q, const torch::Tensor& kv, int64_t heads,
                          const torch::Tensor& bias_in, double p, uint64_t key,
                          torch::Tensor* probs) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, "attention dropout must be in [0, 1), got ", p);
  const Geometry g = geometry(q, kv, heads);
  Bias bias;
  torch::Tensor expanded;
  if (bias_in.defined() && bias_in.numel() > 0) {
    TORCH_CHECK(!bias_in.requires_grad(), "attention_fused: the bias is not differentiated");
    expanded = bias_in.to(torch::kCPU, torch::kFloat).expand({g.B, g.heads, g.Tq, g.Tk});
    bias = {expanded.data_ptr<float>(), expanded.stride(0), expanded.stride(1), expanded.stride(2),
            expanded.stride(3)};
  }
  auto out = torch::empty({g.B, g.Tq, g.d()}, q.options());
  if (probs != nullptr) *probs = torch::empty({g.B, g.heads, g.Tq, g.Tk}, q.options());
  forward_blocks(g, operands(q, kv, g), bias, scale_of(g), p, key,
                 probs != nullptr ? probs->data_ptr<float>() : nullptr, out.data_ptr<float>());
  return out;
}

// The keys are 64-bit; IValues hold int64, so they travel bit-cast.
int64_t bits_to_int(uint64_t v) {
  int64_t i;
  std::memcpy(&i, &v, sizeof i);
  return i;
}
uint64_t int_to_bits(int64_t i) {
  uint64_t v;
  std::memcpy(&v, &i, sizeof v);
  return v;
}

// Keeps q, kv and the softmax [B, heads, Tq, Tk]; backward recomputes the dropout mask. An
// autograd function's inputs must be defined tensors: self-attention passes an empty kv.
struct FusedAttention : torch::autograd::Function<FusedAttention> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& kv_or_empty, int64_t heads,
                               const torch::Tensor& bias, double p, int64_t key) {
    const auto kv = kv_or_empty.numel() > 0 ? kv_or_empty : torch::Tensor();
    torch::Tensor probs;
    auto out = run_forward(q, kv, heads, bias, p, int_to_bits(key), &probs);
    ctx->save_for_backward({q, kv, probs});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["p"] = p;
    ctx->saved_data["key"] = key;
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &kv = saved[1], &probs = saved[2];
    const Geometry g = geometry(q, kv, ctx->saved_data["heads"].toInt());
    const auto gout = grads[0].contiguous();
    auto gq = torch::empty_like(q), gkv = kv.defined() ? torch::empty_like(kv) : torch::Tensor();
    backward_blocks(g, operands(q, kv, g), operands(gq, gkv, g), probs.data_ptr<float>(),
                    gout.data_ptr<float>(), scale_of(g), ctx->saved_data["p"].toDouble(),
                    int_to_bits(ctx->saved_data["key"].toInt()));
    return {gq, gkv, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool fused_attention_applies(const torch::Tensor& q) {
  return q.device().is_cpu() && q.scalar_type() == torch::kFloat && have_sgemm();
}

torch::Tensor attention_fused(const torch::Tensor& q_in, const torch::Tensor& kv_in, int64_t heads,
                              const torch::Tensor& bias, double p, uint64_t key) {
  TORCH_CHECK(fused_attention_applies(q_in) && (!kv_in.defined() || fused_attention_applies(kv_in)),
              "attention_fused: float CPU tensors and a BLAS sgemm_ are needed");
  const auto q = q_in.contiguous();
  const auto kv = kv_in.defined() ? kv_in.contiguous() : kv_in;
  const bool grad =
      torch::GradMode::is_enabled() && (q.requires_grad() || (kv.defined() && kv.requires_grad()));
  if (grad)
    return FusedAttention::apply(q, kv.defined() ? kv : torch::empty({0}, q.options()), heads,
                                 bias.defined() ? bias : torch::empty({0}, q.options()), p,
                                 bits_to_int(key));
  return run_forward(q, kv, heads, bias, p, key, nullptr);
}

namespace {

// Incremental decoding: row n's query q [d] (heads side by side) against T key rows. rows[t]
// points at position t's keys, its values d floats further on (k | v); bias: T additive values
// or null. out [d]; w: T floats of scratch. Scores, softmax and the weighted sum per head, as
// attention_aten computes them (q scaled first), in another summation order.
NMT_CPU_CLONES
void attend_rows(const float* __restrict q, const float* const* rows, int64_t T, int64_t heads,
                 int64_t dh, const float* bias, float scale, float* __restrict w,
                 float* __restrict out) {
  const int64_t d = heads * dh;
  for (int64_t h = 0; h < heads; ++h) {
    float qs[512];  // dh <= 512 is checked by the caller
    for (int64_t i = 0; i < dh; ++i) qs[i] = q[h * dh + i] * scale;
    float max = -INFINITY;
    for (int64_t t = 0; t < T; ++t) {
      float dot = lanes_dot<16>(qs, rows[t] + h * dh, dh);
      if (bias != nullptr) dot += bias[t];
      w[t] = dot;
      max = std::max(max, dot);
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < T; ++t) {
      const float x = w[t] - max;
      w[t] = x < -87.3f ? 0.0f : exp_poly(x);
      sum += w[t];
    }
    const float inv = 1.0f / sum;
    float* o = out + h * dh;
    std::fill(o, o + dh, 0.0f);
    for (int64_t t = 0; t < T; ++t) {
      const float p = w[t] * inv;
      const float* v = rows[t] + d + h * dh;
      for (int64_t i = 0; i < dh; ++i) o[i] += p * v[i];
    }
  }
}

// out [N, d] of queries q (rows of q.stride(0) floats) against the key rows row_of(n, t),
// t < T, and bias_of(n) (T floats or null), the rows split across threads.
template <typename RowOf, typename BiasOf>
torch::Tensor attend_all_rows(const torch::Tensor& q, int64_t heads, int64_t T, const RowOf& row_of,
                              const BiasOf& bias_of) {
  const int64_t N = q.size(0), d = q.size(1), dh = d / heads;
  TORCH_CHECK(d % heads == 0 && dh <= 512, "attention step: width ", d, " is not heads (", heads,
              ") x a head size <= 512");
  TORCH_CHECK(q.stride(1) == 1, "attention step: q's rows must be contiguous");
  auto out = torch::empty({N, d}, q.options());
  const float* pq = q.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  at::parallel_for(0, N, 8, [&](int64_t begin, int64_t end) {
    std::vector<const float*> rows(static_cast<size_t>(T));
    std::vector<float> w(static_cast<size_t>(T));
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t t = 0; t < T; ++t) rows[static_cast<size_t>(t)] = row_of(n, t);
      attend_rows(pq + n * q.stride(0), rows.data(), T, heads, dh, bias_of(n), scale, w.data(),
                  po + n * d);
    }
  });
  return out;
}

bool step_kernel_applies(const torch::Tensor& q, const torch::Tensor& kv) {
  return q.device().is_cpu() && q.scalar_type() == torch::kFloat && kv.device().is_cpu() &&
         kv.scalar_type() == torch::kFloat &&
         !(torch::GradMode::is_enabled() && (q.requires_grad() || kv.requires_grad()));
}

}  // namespace

torch::Tensor attention_step_gather(const torch::Tensor& q, const torch::Tensor& kv,
                                    const torch::Tensor& slots, int64_t heads) {
  const int64_t N = q.size(0), d = q.size(1), T = slots.size(1);
  TORCH_CHECK(q.dim() == 2 && kv.dim() == 2 && kv.size(1) == 2 * d && slots.dim() == 2 &&
                  slots.size(0) == N && slots.scalar_type() == torch::kLong,
              "attention_step_gather: q [N, d], kv [M, 2d], slots [N, T] int64 expected, got ",
              q.sizes(), ", ", kv.sizes(), ", ", slots.sizes());
  if (!step_kernel_applies(q, kv)) {
    const int64_t dh = d / heads;
    const auto g = kv.index_select(0, slots.reshape({-1})).view({N, T, 2, heads, dh});
    const auto qh = q.reshape({N, 1, heads, dh}).transpose(1, 2);
    return attention_aten(qh, g.select(2, 0).transpose(1, 2), g.select(2, 1).transpose(1, 2),
                          torch::Tensor(), 0.0, 0)
        .view({N, d});
  }
  const auto table = kv.contiguous();
  const auto index = slots.to(torch::kCPU).contiguous();
  const float* base = table.data_ptr<float>();
  const int64_t* slot = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < index.numel(); ++i)
    TORCH_CHECK(slot[i] >= 0 && slot[i] < table.size(0), "attention_step_gather: slot ", slot[i],
                " is outside the table's ", table.size(0), " rows");
  return attend_all_rows(
      q, heads, T, [&](int64_t n, int64_t t) { return base + slot[n * T + t] * 2 * d; },
      [](int64_t) -> const float* { return nullptr; });
}

torch::Tensor attention_step_grouped(const torch::Tensor& q, const torch::Tensor& kv,
                                     const torch::Tensor& bias, int64_t heads,
                                     torch::Tensor* weights) {
  const int64_t N = q.size(0), d = q.size(1);
  TORCH_CHECK(
      q.dim() == 2 && kv.dim() == 3 && kv.size(2) == 2 * d && kv.size(0) > 0 && N % kv.size(0) == 0,
      "attention_step_grouped: q [N, d], kv [B, S, 2d] with B dividing N expected, got ", q.sizes(),
      ", ", kv.sizes());
  const int64_t B = kv.size(0), S = kv.size(1), group = N / B;
  if (weights != nullptr || !step_kernel_applies(q, kv)) {
    // A sentence's rows attend to its one copy of the memory as if they were query positions:
    // [B, heads, group, dh] against [B, heads, S, dh], one product per sentence.
    const auto k_v = split_heads(kv, 2, heads);
    const auto qh = q.reshape({B, group, heads, d / heads}).transpose(1, 2);
    auto out = attention_aten(qh, k_v[0], k_v[1], bias, 0.0, 0, weights).view({N, d});
    if (weights != nullptr) *weights = weights->transpose(1, 2).reshape({N, heads, 1, S});
    return out;
  }
  const auto table = kv.contiguous();
  torch::Tensor b;
  if (bias.defined()) {
    TORCH_CHECK(bias.numel() == B * S, "attention_step_grouped: bias [B, 1, 1, S] expected, got ",
                bias.sizes());
    b = bias.to(torch::kCPU, torch::kFloat).contiguous();
  }
  const float* base = table.data_ptr<float>();
  const float* pb = b.defined() ? b.data_ptr<float>() : nullptr;
  return attend_all_rows(
      q, heads, S, [&](int64_t n, int64_t t) { return base + ((n / group) * S + t) * 2 * d; },
      [&](int64_t n) { return pb != nullptr ? pb + (n / group) * S : nullptr; });
}

torch::Tensor attention_aten(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& bias, double p, uint64_t key,
                             torch::Tensor* weights) {
  // Scaling q before the product costs Tq*dh multiplies instead of Tq*Tk.
  auto scores =
      torch::matmul(q * (1.0 / std::sqrt(static_cast<double>(q.size(3)))), k.transpose(-2, -1));
  if (bias.defined()) scores = scores + bias;
  auto w = torch::softmax(scores, -1);
  if (weights != nullptr) *weights = w;
  if (p > 0.0) w = dropout_keyed(w, p, key);
  const int64_t B = q.size(0), Tq = q.size(2);
  return torch::matmul(w, v).transpose(1, 2).reshape({B, Tq, q.size(1) * q.size(3)});
}

std::vector<torch::Tensor> split_heads(const torch::Tensor& x, int64_t parts, int64_t heads) {
  // unbind, not indexing: the gradient of x[i] is a zero tensor of x's full size with one part
  // filled, and the parts' gradients are then summed (three full passes for Q, K, V), while
  // unbind's gradient is one stack into x's own layout.
  const int64_t d = x.size(2) / parts;
  if (parts == 1) return {x.view({x.size(0), x.size(1), heads, d / heads}).transpose(1, 2)};
  auto out = x.view({x.size(0), x.size(1), parts, heads, d / heads}).unbind(2);
  for (auto& part : out) part = part.transpose(1, 2);  // [B, heads, T, dh]
  return out;
}

}  // namespace nmt
