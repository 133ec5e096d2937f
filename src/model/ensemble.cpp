#include "model/ensemble.h"

#include <algorithm>
#include <numeric>

#include "util/util.h"

namespace nmt {
namespace {

class EnsembleState : public DecoderState {
 public:
  std::vector<std::unique_ptr<DecoderState>> members;

  void select(const torch::Tensor& index) override {
    for (auto& m : members) m->select(index);
  }
  void reorder(const torch::Tensor& index) override {
    for (auto& m : members) m->reorder(index);
  }
};

EnsembleState& ensemble_state(DecoderState& state) {
  auto* cast = dynamic_cast<EnsembleState*>(&state);
  if (cast == nullptr) throw Error("ensemble: the decoder state was not made by this ensemble");
  return *cast;
}

}  // namespace

EnsembleImpl::EnsembleImpl(std::vector<Seq2Seq> members, std::vector<double> weights)
    : Seq2SeqImpl(members.empty() ? ModelConfig{} : members.front()->config()),
      members_(std::move(members)) {
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
  for (size_t i = 0; i < members_.size(); ++i) {
    register_module("member" + std::to_string(i), members_[i]);
    widths_.push_back(members_[i]->config().d_model);
  }
}

torch::Tensor EnsembleImpl::join(std::vector<torch::Tensor> parts) const {
  return parts.size() == 1 ? parts.front() : torch::cat(parts, -1);
}

Encoded EnsembleImpl::encode(const torch::Tensor& src) {
  Encoded enc;
  for (auto& m : members_) enc.members.push_back(m->encode(src));
  enc.memory = enc.members.front().memory;
  enc.bias = enc.members.front().bias;
  return enc;
}

torch::Tensor EnsembleImpl::decode(const torch::Tensor& tgt_in, const Encoded& enc,
                                   std::vector<torch::Tensor>* attention) {
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < members_.size(); ++i)
    parts.push_back(members_[i]->decode(tgt_in, enc.members.at(i), i == 0 ? attention : nullptr));
  return join(std::move(parts));
}

std::unique_ptr<DecoderState> EnsembleImpl::start_decoding(const Encoded& enc, int64_t group) {
  auto state = std::make_unique<EnsembleState>();
  state->group = group;
  for (size_t i = 0; i < members_.size(); ++i)
    state->members.push_back(members_[i]->start_decoding(enc.members.at(i), group));
  return state;
}

torch::Tensor EnsembleImpl::decode_step(const torch::Tensor& tokens, DecoderState& state,
                                        std::vector<torch::Tensor>* attention) {
  EnsembleState& s = ensemble_state(state);
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < members_.size(); ++i)
    parts.push_back(members_[i]->decode_step(tokens, *s.members[i], i == 0 ? attention : nullptr));
  ++state.length;
  return join(std::move(parts));
}

torch::Tensor EnsembleImpl::project(const torch::Tensor& states) {
  // One member: its logits as they are, so the output is the single model's to the bit.
  if (members_.size() == 1) return members_.front()->project(states);
  torch::Tensor mixed;
  int64_t offset = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    // Contiguous, so that the product takes the same kernels as a single model's.
    const auto part = states.narrow(-1, offset, widths_[i]).contiguous();
    offset += widths_[i];
    const auto log_probs = torch::log_softmax(members_[i]->project(part).to(torch::kFloat), -1);
    if (mixed.defined())
      mixed.add_(log_probs, weights_[i]);
    else
      mixed = log_probs.mul_(weights_[i]);
  }
  return mixed;
}

int64_t EnsembleImpl::max_positions() const {
  int64_t m = members_.front()->max_positions();
  for (const auto& member : members_) m = std::min(m, member->max_positions());
  return m;
}

int64_t EnsembleImpl::attention_layers() const { return members_.front()->attention_layers(); }
int64_t EnsembleImpl::attention_heads() const { return members_.front()->attention_heads(); }

}  // namespace nmt
