#include "model/linear.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstring>

#include "util/blas.h"
#include "util/util.h"

namespace nmt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y [m, n] = a [m, k] op(b) (+ y, with accumulate), by the library the rule picks for the shape.
// b is [n, k] with trans_b, else [k, n].
void product(const torch::Tensor& a, const torch::Tensor& b, bool trans_b, torch::Tensor& y,
             bool accumulate) {
  const int64_t m = a.size(0), k = a.size(1), n = y.size(1);
  if (onednn_takes(m, n, k)) {
    onednn_sgemm_row_major(trans_b, m, n, k, 1.0f, a.data_ptr<float>(), k, b.data_ptr<float>(),
                           trans_b ? k : n, accumulate ? 1.0f : 0.0f, y.data_ptr<float>(), n);
  } else if (accumulate) {
    y.addmm_(a, trans_b ? b.t() : b);
  } else {
    at::mm_out(y, a, trans_b ? b.t() : b);
  }
}

// The raw bits of a contiguous bfloat16 tensor, as oneDNN takes them.
const uint16_t* bits(const torch::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>());
}

// y [m, n] = op(a) op(b) (+ y, with accumulate) for contiguous bfloat16 a and b: op(a) is a's
// transpose with trans_a (a is then [k, m]), op(b) likewise.
void bf16_product(const torch::Tensor& a, bool trans_a, const torch::Tensor& b, bool trans_b,
                  torch::Tensor& y, bool accumulate) {
  const int64_t m = y.size(0), n = y.size(1), k = trans_a ? a.size(0) : a.size(1);
  onednn_bf16_gemm_row_major(trans_a, trans_b, m, n, k, 1.0f, bits(a), a.size(1), bits(b),
                             b.size(1), accumulate ? 1.0f : 0.0f, y.data_ptr<float>(), n);
}

// float to bfloat16 rounded to nearest even, a NaN to a NaN: for finite values the bits of
// c10::BFloat16 (ATen's .to(kBFloat16)), in integer operations that vectorize 16 wide.
inline uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const auto rounded = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? uint16_t{0x7FC0} : rounded;
}

NMT_CPU_CLONES
void round_to_bf16(const float* __restrict src, uint16_t* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits(src[i]);
}

// Rows a block of the column sums' partial sums covers: fixed, so that the sums, added in block
// order, are the same bits at every thread count.
constexpr int64_t kSumRows = 64;

// The same for rows [0, rows) of a row-major [rows, n] block, whose column sums go to sums [n]
// as well: the output gradient's bfloat16 copy and the bias's gradient in one pass over it.
NMT_CPU_CLONES
void round_to_bf16_and_sum(const float* __restrict src, uint16_t* __restrict dst,
                           float* __restrict sums, int64_t rows, int64_t n) {
  for (int64_t j = 0; j < n; ++j) sums[j] = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = src + r * n;
    uint16_t* out = dst + r * n;
    for (int64_t j = 0; j < n; ++j) {
      out[j] = bf16_bits(row[j]);
      sums[j] += row[j];
    }
  }
}

uint16_t* mutable_bits(torch::Tensor& t) {
  return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>());
}

}  // namespace

torch::Tensor to_bf16(const torch::Tensor& t) {
  const auto src = t.contiguous();
  auto dst = torch::empty(src.sizes(), src.options().dtype(torch::kBFloat16));
  const float* s = src.data_ptr<float>();
  uint16_t* d = mutable_bits(dst);
  at::parallel_for(0, src.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    round_to_bf16(s + begin, d + begin, end - begin);
  });
  return dst;
}

torch::Tensor to_bf16_with_column_sums(const torch::Tensor& g, torch::Tensor* sums) {
  const int64_t m = g.size(0), n = g.size(1), blocks = (m + kSumRows - 1) / kSumRows;
  auto dst = torch::empty({m, n}, g.options().dtype(torch::kBFloat16));
  auto partial = torch::empty({blocks, n}, g.options());
  const float* s = g.data_ptr<float>();
  uint16_t* d = mutable_bits(dst);
  float* p = partial.data_ptr<float>();
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t r0 = b * kSumRows, rows = std::min(kSumRows, m - r0);
      round_to_bf16_and_sum(s + r0 * n, d + r0 * n, p + b * n, rows, n);
    }
  });
  *sums = torch::empty({n}, g.options());
  float* out = sums->data_ptr<float>();
  for (int64_t j = 0; j < n; ++j) out[j] = p[j];
  for (int64_t b = 1; b < blocks; ++b)
    for (int64_t j = 0; j < n; ++j) out[j] += p[b * n + j];
  return dst;
}

namespace {

// Inputs must be defined tensors: a layer without bias passes an empty one (which needs no
// gradient) and has_bias false. With bf16, the products take bfloat16 copies of x, W and the
// output gradient, and those copies (half the size) are what backward keeps.
struct Linear : torch::autograd::Function<Linear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               bool has_bias, bool bf16) {
    const auto x2 = x.contiguous().view({-1, x.size(-1)});
    const auto w = weight.contiguous();
    // A fresh output: with one row, the expanded bias is contiguous, and .contiguous() would
    // hand back the bias itself to accumulate into.
    auto y = torch::empty({x2.size(0), w.size(0)}, x.options());
    if (has_bias) y.copy_(bias.expand_as(y));
    if (bf16) {
      const auto xb = to_bf16(x2), wb = to_bf16(w);
      bf16_product(xb, false, wb, /*trans_b=*/true, y, /*accumulate=*/has_bias);
      ctx->save_for_backward({xb, wb});
    } else {
      product(x2, w, /*trans_b=*/true, y, /*accumulate=*/has_bias);
      ctx->save_for_backward({x2, w});
    }
    ctx->saved_data["bf16"] = bf16;
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(0);
    return y.view(sizes);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x2 = saved[0];
    const auto& w = saved[1];
    const bool bf16 = ctx->saved_data["bf16"].toBool();
    const auto g = grads[0].contiguous().view({-1, w.size(0)});
    const bool need_gx = ctx->needs_input_grad(0), need_gw = ctx->needs_input_grad(1);
    const bool need_gb = ctx->needs_input_grad(2);
    torch::Tensor gx, gw, gb, gb16;
    if (bf16 && (need_gx || need_gw))
      gb16 = need_gb ? to_bf16_with_column_sums(g, &gb) : to_bf16(g);
    if (need_gx) {
      gx = torch::empty({g.size(0), w.size(1)}, g.options());
      if (bf16)
        bf16_product(gb16, false, w, /*trans_b=*/false, gx, /*accumulate=*/false);
      else
        product(g, w, /*trans_b=*/false, gx, /*accumulate=*/false);
      auto sizes = grads[0].sizes().vec();  // x's: the output's with the input width last
      sizes.back() = w.size(1);
      gx = gx.view(sizes);
    }
    if (need_gw) {
      if (bf16) {
        gw = torch::empty({w.size(0), w.size(1)}, g.options());
        bf16_product(gb16, /*trans_a=*/true, x2, false, gw, /*accumulate=*/false);
      } else {
        gw = g.t().mm(x2);  // oneDNN's sgemm lost on these by up to 2x
      }
    }
    if (need_gb && !gb.defined()) gb = g.sum(0);
    return {gx, gw, gb, torch::Tensor(), torch::Tensor()};
  }
};

thread_local bool t_bf16_products = false;

bool own_node_applies(const torch::Tensor& x, const torch::Tensor& weight,
                      const torch::Tensor& bias) {
  if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat || x.dim() < 1) return false;
  if (!weight.device().is_cpu() || weight.scalar_type() != torch::kFloat || weight.dim() != 2)
    return false;
  if (bias.defined() && (!bias.device().is_cpu() || bias.scalar_type() != torch::kFloat))
    return false;
  const int64_t in = weight.size(1), out = weight.size(0);
  if (x.size(-1) != in || x.numel() == 0) return false;  // ATen reports the mismatch
  if (t_bf16_products) return true;
  const int64_t m = x.numel() / in;
  // Worth a node of its own only where oneDNN takes the forward or the input gradient.
  return onednn_takes(m, out, in) || (x.requires_grad() && onednn_takes(m, in, out));
}

}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  if (!own_node_applies(x, weight, bias)) return torch::nn::functional::linear(x, weight, bias);
  return Linear::apply(x, weight, bias.defined() ? bias : torch::empty({0}, weight.options()),
                       bias.defined(), t_bf16_products);
}

torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return linear(x, layer->weight, layer->bias);
}

bool bf16_products() { return t_bf16_products; }

Bf16ProductsGuard::Bf16ProductsGuard() : previous_(t_bf16_products) {
  if (!have_bf16_gemm()) throw Error("bfloat16 products on the CPU: " + bf16_gemm_missing());
  t_bf16_products = true;
}

Bf16ProductsGuard::~Bf16ProductsGuard() { t_bf16_products = previous_; }

}  // namespace nmt
