#include "model/attention.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

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
  const int64_t body = cols / kLanes * kLanes;
  for (int64_t i = 0; i < rows; ++i) {
    float* r = s + i * cols;
    if (bias != nullptr) {
      const float* br = bias + i * bias_row;
      for (int64_t j = 0; j < cols; ++j) r[j] += br[j * bias_col];
    }
    float lanes[kLanes];
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = -INFINITY;
    for (int64_t j = 0; j < body; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] = std::max(lanes[l], r[j + l]);
    float max = -INFINITY;
    for (int64_t l = 0; l < kLanes; ++l) max = std::max(max, lanes[l]);
    for (int64_t j = body; j < cols; ++j) max = std::max(max, r[j]);
    for (int64_t j = 0; j < cols; ++j) {
      const float x = r[j] - max;
      r[j] = x < -87.3f ? 0.0f : exp_poly(x);
    }
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = 0.0f;
    for (int64_t j = 0; j < body; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] += r[j + l];
    float sum = 0.0f;
    for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
    for (int64_t j = body; j < cols; ++j) sum += r[j];
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < cols; ++j) r[j] *= inv;
  }
}

// Softmax backward in place, row by row: dp becomes p * (dp - sum_j dp_j p_j).
NMT_CPU_CLONES
void softmax_backward_rows(float* __restrict dp, const float* __restrict p, int64_t rows,
                           int64_t cols) {
  const int64_t body = cols / kLanes * kLanes;
  for (int64_t i = 0; i < rows; ++i) {
    float* g = dp + i * cols;
    const float* y = p + i * cols;
    float lanes[kLanes] = {};
    for (int64_t j = 0; j < body; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] += g[j + l] * y[j + l];
    float dot = 0.0f;
    for (int64_t l = 0; l < kLanes; ++l) dot += lanes[l];
    for (int64_t j = body; j < cols; ++j) dot += g[j] * y[j];
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
