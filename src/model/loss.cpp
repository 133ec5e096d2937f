#include "model/loss.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "util/fast_math.h"
#include "util/util.h"

namespace nmt {

namespace {

// Sixteen partial sums or maxima: GCC vectorizes these across lanes without reordering a single
// float reduction (which it may not do without -ffast-math).
constexpr int64_t kLanes = 16;

// Rows [begin, end) of the fused loss, float logits x [N, V] row-major: grad's rows become
// softmax - (1 - eps) onehot(gold) - eps / V (zero for ignored rows), nll[i] = lse - x_gold and
// smooth[i] = lse - mean(x) (zero for ignored rows). Three passes over a row (32 KB at V = 8000,
// so the second and third hit the cache) instead of eight ATen passes over the whole matrix.
NMT_CPU_CLONES
void loss_rows(const float* __restrict x, const int64_t* target, float* __restrict grad, float* nll,
               float* smooth, int64_t V, float epsilon, int64_t ignore_index, int64_t begin,
               int64_t end) {
  const int64_t body = V / kLanes * kLanes;
  for (int64_t i = begin; i < end; ++i) {
    const float* row = x + i * V;
    float* g = grad + i * V;
    if (target[i] == ignore_index) {
      std::fill(g, g + V, 0.0f);
      nll[i] = smooth[i] = 0.0f;
      continue;
    }
    float mx[kLanes], sx[kLanes];
    for (int64_t l = 0; l < kLanes; ++l) mx[l] = -INFINITY, sx[l] = 0.0f;
    for (int64_t v = 0; v < body; v += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) {
        mx[l] = std::max(mx[l], row[v + l]);
        sx[l] += row[v + l];
      }
    float max = -INFINITY, sum_x = 0.0f;
    for (int64_t l = 0; l < kLanes; ++l) max = std::max(max, mx[l]), sum_x += sx[l];
    for (int64_t v = body; v < V; ++v) max = std::max(max, row[v]), sum_x += row[v];

    float se[kLanes] = {};
    for (int64_t v = 0; v < body; v += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) {
        const float e = exp_poly(row[v + l] - max);
        g[v + l] = e;
        se[l] += e;
      }
    float sum = 0.0f;
    for (int64_t l = 0; l < kLanes; ++l) sum += se[l];
    for (int64_t v = body; v < V; ++v) sum += (g[v] = exp_poly(row[v] - max));

    const float lse = max + std::log(sum);
    nll[i] = lse - row[target[i]];
    smooth[i] = lse - sum_x / static_cast<float>(V);
    const float inv = 1.0f / sum, uniform = epsilon / static_cast<float>(V);
    for (int64_t v = 0; v < V; ++v) g[v] = g[v] * inv - uniform;
    g[target[i]] -= 1.0f - epsilon;
  }
}

}  // namespace

float exp_approx(float x) { return exp_poly(x); }

namespace {

// The loss and NLL sums of float CPU logits, and d(loss)/d(logits) in the one [N, V] tensor
// allocated: no log-probability matrix, one-hot or smoothed target is materialised.
std::pair<torch::Tensor, torch::Tensor> smoothed_sums_cpu(const torch::Tensor& logits_in,
                                                          const torch::Tensor& target_in,
                                                          double epsilon, int64_t ignore_index,
                                                          torch::Tensor* grad) {
  const auto logits = logits_in.contiguous();
  const auto target = target_in.to(torch::kLong).contiguous();
  const int64_t N = logits.size(0), V = logits.size(1);
  TORCH_CHECK(
      target.eq(ignore_index).logical_or(target.ge(0).logical_and(target.lt(V))).all().item<bool>(),
      "label_smoothed_loss: a target is outside [0, ", V, ")");
  *grad = torch::empty_like(logits);
  auto nll = torch::empty({N}, logits.options()), smooth = torch::empty({N}, logits.options());
  const float* x = logits.data_ptr<float>();
  const int64_t* t = target.data_ptr<int64_t>();
  float *g = grad->data_ptr<float>(), *pn = nll.data_ptr<float>(), *ps = smooth.data_ptr<float>();
  const auto eps = static_cast<float>(epsilon);
  at::parallel_for(0, N, 1, [&](int64_t begin, int64_t end) {
    loss_rows(x, t, g, pn, ps, V, eps, ignore_index, begin, end);
  });
  auto loss = ((1.0 - epsilon) * nll + epsilon * smooth).sum();
  return {loss, nll.sum()};
}

// The smoothed loss and NLL sums of logits [N, V] by ATen ops that autograd differentiates (the
// row maximum is only a shift, so it is detached): the path for CUDA, other dtypes and no grad.
std::pair<torch::Tensor, torch::Tensor> smoothed_sums(const torch::Tensor& logits,
                                                      const torch::Tensor& target, double epsilon,
                                                      int64_t ignore_index) {
  const auto keep = target.ne(ignore_index);
  const auto keep_f = keep.to(logits.scalar_type());
  const auto gold = target.masked_fill(~keep, 0).unsqueeze(1);
  const auto max = std::get<0>(logits.max(1, true)).detach();
  const auto lse = (max + (logits - max).exp_().sum(1, true).log()).squeeze(1);
  // -log p_gold = lse - x_gold; mean_v(-log p_v) = lse - mean_v(x_v).
  const auto nll = lse - logits.gather(1, gold).squeeze(1);
  const auto smooth = lse - logits.mean(1);
  auto loss = ((1.0 - epsilon) * nll + epsilon * smooth).mul(keep_f).sum();
  return {loss, nll.mul(keep_f).sum()};
}

// The loss as one autograd node that keeps only its gradient matrix: the unfused graph kept the
// log-probabilities and built two more [N, V] tensors in backward.
struct SmoothedCrossEntropy : torch::autograd::Function<SmoothedCrossEntropy> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& logits,
                                                const torch::Tensor& target, double epsilon,
                                                int64_t ignore_index) {
    torch::Tensor grad;
    auto [loss, nll] = smoothed_sums_cpu(logits, target, epsilon, ignore_index, &grad);
    ctx->save_for_backward({grad});
    ctx->mark_non_differentiable({nll});
    return {loss, nll};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto grad = ctx->get_saved_variables()[0];
    // Scaled in place: the saved matrix is not needed again (the trainer never retains the
    // graph), and a copy would be the step's largest allocation.
    return {grad.mul_(grads[0]), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

void check_shapes(const torch::Tensor& logits, const torch::Tensor& target) {
  TORCH_CHECK(logits.dim() == 2 && target.dim() == 1 && target.size(0) == logits.size(0),
              "label_smoothed_loss: logits [N, V] and target [N] expected, got ", logits.sizes(),
              " and ", target.sizes());
}

}  // namespace

LossSums label_smoothed_loss_fused(const torch::Tensor& logits, const torch::Tensor& target,
                                   double epsilon, int64_t ignore_index) {
  check_shapes(logits, target);
  TORCH_CHECK(logits.device().is_cpu() && logits.scalar_type() == torch::kFloat,
              "label_smoothed_loss_fused: float CPU logits only");
  auto sums = SmoothedCrossEntropy::apply(logits, target, epsilon, ignore_index);
  return {sums[0], sums[1]};
}

LossSums label_smoothed_loss_aten(const torch::Tensor& logits, const torch::Tensor& target,
                                  double epsilon, int64_t ignore_index) {
  check_shapes(logits, target);
  auto [loss, nll] = smoothed_sums(logits.to(torch::kFloat), target, epsilon, ignore_index);
  return {loss, nll};
}

LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon, int64_t ignore_index) {
  const bool fused = torch::GradMode::is_enabled() && logits.requires_grad() &&
                     logits.device().is_cpu() && logits.scalar_type() == torch::kFloat;
  return fused ? label_smoothed_loss_fused(logits, target, epsilon, ignore_index)
               : label_smoothed_loss_aten(logits, target, epsilon, ignore_index);
}

}  // namespace nmt
