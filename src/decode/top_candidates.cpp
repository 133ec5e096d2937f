#include "decode/top_candidates.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "util/fast_math.h"
#include "util/util.h"

namespace nmt {

namespace {

// Sixteen partial maxima or sums: GCC vectorizes these across lanes (one float reduction it may
// not reorder without -ffast-math).
constexpr int64_t kLanes = 16;

// log_softmax's normaliser of one row: its max and log(sum(exp(x - max))).
struct Normaliser {
  float max, log_sum;
};

NMT_CPU_CLONES
Normaliser row_normaliser(const float* __restrict x, int64_t V) {
  const int64_t body = V / kLanes * kLanes;
  const float max = lanes_max<kLanes>(x, V);
  float lanes[kLanes] = {};
  for (int64_t v = 0; v < body; v += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += exp_poly(x[v + l] - max);
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  for (int64_t v = body; v < V; ++v) sum += exp_poly(x[v] - max);
  return {max, std::log(sum)};
}

// The `width` largest (value, id) seen, best first; among equal values the first seen first.
class TopList {
 public:
  TopList(float* values, int64_t* ids, int64_t width) : values_(values), ids_(ids), width_(width) {}
  // Values below this cannot enter.
  float threshold() const { return size_ < width_ ? -INFINITY : values_[width_ - 1]; }
  void offer(float value, int64_t id) {
    if (size_ == width_ && !(value > values_[width_ - 1])) return;
    int64_t i = std::min(size_, width_ - 1);
    for (; i > 0 && value > values_[i - 1]; --i) {
      values_[i] = values_[i - 1];
      ids_[i] = ids_[i - 1];
    }
    values_[i] = value;
    ids_[i] = id;
    size_ = std::min(size_ + 1, width_);
  }
  bool full() const { return size_ == width_; }

 private:
  float* values_;
  int64_t* ids_;
  int64_t width_, size_ = 0;
};

// Offers every log_softmax(x)[v] + score of one row (ids offset + v) to `top`. The values of a
// chunk are computed (vectorized) before any is offered, and a chunk whose best cannot enter is
// skipped: after the first few chunks almost all are.
NMT_CPU_CLONES
void offer_row(const float* __restrict x, int64_t V, Normaliser norm, float score, int64_t offset,
               TopList& top) {
  constexpr int64_t kChunk = 64;
  float values[kChunk];
  for (int64_t v0 = 0; v0 < V; v0 += kChunk) {
    const int64_t n = std::min(kChunk, V - v0);
    for (int64_t v = 0; v < n; ++v) values[v] = ((x[v0 + v] - norm.max) - norm.log_sum) + score;
    if (top.full() && !(lanes_max<kLanes>(values, n) > top.threshold())) continue;
    for (int64_t v = 0; v < n; ++v) top.offer(values[v], offset + v0 + v);
  }
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> top_candidates_aten(const torch::Tensor& logits,
                                                            const torch::Tensor& scores,
                                                            int64_t group, int64_t width) {
  const int64_t R = logits.size(0), V = logits.size(1);
  const auto totals =
      torch::log_softmax(logits.to(torch::kFloat), -1) + scores.to(torch::kFloat).view({R, 1});
  auto [values, ids] = totals.view({R / group, group * V}).topk(width, 1);
  return {values, ids};
}

std::pair<torch::Tensor, torch::Tensor> top_candidates(const torch::Tensor& logits,
                                                       const torch::Tensor& scores, int64_t group,
                                                       int64_t width) {
  if (logits.dim() != 2 || scores.dim() != 1 || scores.size(0) != logits.size(0) || group < 1 ||
      logits.size(0) % group != 0 || width < 1 || width > group * logits.size(1))
    throw Error(
        "top_candidates: logits [R, V], scores [R], R a multiple of the group and width <= "
        "group * V expected");
  if (!logits.device().is_cpu() || logits.scalar_type() != torch::kFloat)
    return top_candidates_aten(logits, scores, group, width);
  const auto x = logits.contiguous();
  const auto s = scores.to(torch::kFloat).contiguous();
  const int64_t R = x.size(0), V = x.size(1), G = R / group;
  auto top_values = torch::empty({G, width}, torch::kFloat);
  auto top_ids = torch::empty({G, width}, torch::kLong);
  const float* px = x.data_ptr<float>();
  const float* ps = s.data_ptr<float>();
  float* pv = top_values.data_ptr<float>();
  int64_t* pi = top_ids.data_ptr<int64_t>();
  at::parallel_for(0, G, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      TopList top(pv + g * width, pi + g * width, width);
      for (int64_t k = 0; k < group; ++k) {
        const int64_t r = g * group + k;
        const float* row = px + r * V;
        offer_row(row, V, row_normaliser(row, V), ps[r], k * V, top);
      }
    }
  });
  return {top_values, top_ids};
}

}  // namespace nmt
