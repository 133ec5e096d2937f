#include "decode/scorer.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "util/util.h"

namespace nmt {
namespace {

class ModelState : public ScorerState {
 public:
  explicit ModelState(std::unique_ptr<DecoderState> state) : state_(std::move(state)) {}
  void select(const torch::Tensor& index) override { state_->select(index); }
  void reorder(const torch::Tensor& index) override { state_->reorder(index); }
  DecoderState& decoder() { return *state_; }

 private:
  std::unique_ptr<DecoderState> state_;
};

class EnsembleState : public ScorerState {
 public:
  std::vector<std::unique_ptr<ScorerState>> members;
  // The batch's rows are the same in every member: one index serves them all.
  void select(const torch::Tensor& index) override {
    for (auto& m : members) m->select(index);
  }
  void reorder(const torch::Tensor& index) override {
    for (auto& m : members) m->reorder(index);
  }
};

template <class State>
State& state_of(ScorerState& state, const char* who) {
  auto* cast = dynamic_cast<State*>(&state);
  if (cast == nullptr)
    throw Error(std::string(who) + ": the decoding state was not made by this scorer");
  return *cast;
}

NMT_CPU_CLONES
void mix_rows(float* __restrict acc, const float* __restrict x, float acc_scale, float w,
              int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = acc_scale * acc[i] + w * x[i];
}

}  // namespace

torch::Tensor mix_scores(torch::Tensor acc, double acc_scale, const torch::Tensor& x, double w) {
  if (!acc.device().is_cpu() || acc.scalar_type() != torch::kFloat || !acc.is_contiguous() ||
      x.scalar_type() != torch::kFloat || x.sizes() != acc.sizes()) {
    acc = acc.to(torch::kFloat);
    if (acc_scale != 1.0) acc.mul_(acc_scale);
    return acc.add_(x.to(torch::kFloat), w);
  }
  const auto xc = x.contiguous();
  float* pa = acc.data_ptr<float>();
  const float* px = xc.data_ptr<float>();
  const auto a = static_cast<float>(acc_scale), b = static_cast<float>(w);
  // Grains of 64 Ki floats: one batch's [N, V] splits over the threads, a small one does not.
  at::parallel_for(0, acc.numel(), int64_t{1} << 16, [&](int64_t begin, int64_t end) {
    mix_rows(pa + begin, px + begin, a, b, end - begin);
  });
  return acc;
}

std::unique_ptr<ScorerState> ModelScorer::start(const torch::Tensor& src, int64_t group) {
  return std::make_unique<ModelState>(model_->start_decoding(model_->encode(src), group));
}

torch::Tensor ModelScorer::step(const torch::Tensor& tokens, ScorerState& state) {
  return model_->project(
      model_->decode_step(tokens, state_of<ModelState>(state, "model scorer").decoder()));
}

torch::Tensor ModelScorer::forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  return model_->forward(src, tgt_in);
}

std::vector<torch::Tensor> ModelScorer::attention(const torch::Tensor& src,
                                                  const torch::Tensor& tgt_in) {
  std::vector<torch::Tensor> weights;
  model_->decode(tgt_in, model_->encode(src), &weights);
  return weights;
}

EnsembleScorer::EnsembleScorer(std::vector<std::unique_ptr<Scorer>> members,
                               std::vector<double> weights)
    : members_(std::move(members)) {
  if (members_.empty()) throw Error("an ensemble needs at least one model");
  if (!weights.empty() && weights.size() != members_.size())
    throw Error("--ensemble-weights has " + std::to_string(weights.size()) + " weights for " +
                std::to_string(members_.size()) + " models");
  if (weights.empty()) weights.assign(members_.size(), 1.0);
  double sum = 0;
  for (const double w : weights) {
    if (!(w >= 0) || !std::isfinite(w))
      throw Error("ensemble weights must be finite and >= 0, got " + std::to_string(w));
    sum += w;
  }
  if (sum <= 0) throw Error("ensemble weights must not all be 0");
  for (double& w : weights) w /= sum;
  weights_ = std::move(weights);
}

std::unique_ptr<ScorerState> EnsembleScorer::start(const torch::Tensor& src, int64_t group) {
  auto state = std::make_unique<EnsembleState>();
  for (auto& m : members_) state->members.push_back(m->start(src, group));
  return state;
}

torch::Tensor EnsembleScorer::step(const torch::Tensor& tokens, ScorerState& state) {
  auto& s = state_of<EnsembleState>(state, "ensemble");
  // One member: its scores as they are, so the output is the single model's to the bit.
  auto mixed = members_[0]->step(tokens, *s.members[0]);
  for (size_t i = 1; i < members_.size(); ++i)
    mixed = mix_scores(std::move(mixed), i == 1 ? weights_[0] : 1.0,
                       members_[i]->step(tokens, *s.members[i]), weights_[i]);
  return mixed;
}

torch::Tensor EnsembleScorer::forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  auto mixed = members_[0]->forward(src, tgt_in);
  for (size_t i = 1; i < members_.size(); ++i)
    mixed = mix_scores(std::move(mixed), i == 1 ? weights_[0] : 1.0,
                       members_[i]->forward(src, tgt_in), weights_[i]);
  return mixed;
}

std::vector<torch::Tensor> EnsembleScorer::attention(const torch::Tensor& src,
                                                     const torch::Tensor& tgt_in) {
  return members_.front()->attention(src, tgt_in);
}

int64_t EnsembleScorer::attention_layers() const { return members_.front()->attention_layers(); }
int64_t EnsembleScorer::attention_heads() const { return members_.front()->attention_heads(); }
torch::Device EnsembleScorer::device() const { return members_.front()->device(); }

int64_t EnsembleScorer::max_positions() const {
  int64_t m = members_.front()->max_positions();
  for (const auto& member : members_) m = std::min(m, member->max_positions());
  return m;
}

std::unique_ptr<Scorer> make_scorer(const std::vector<Seq2Seq>& models,
                                    const std::vector<double>& weights) {
  if (models.size() == 1 && weights.empty()) return std::make_unique<ModelScorer>(models.front());
  std::vector<std::unique_ptr<Scorer>> members;
  for (const auto& m : models) members.push_back(std::make_unique<ModelScorer>(m));
  return std::make_unique<EnsembleScorer>(std::move(members), weights);
}

}  // namespace nmt
