// Golden tests: fixtures written by scripts/make_golden*.py (PyTorch, float64) loaded into nmt's
// models, whose logits must agree.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "model/seq2seq.h"

namespace nmt_test {

inline torch::Tensor tensor_from_json(const nlohmann::json& j) {
  const auto shape = j.at("shape").get<std::vector<int64_t>>();
  const auto data = j.at("data").get<std::vector<double>>();
  return torch::tensor(data, torch::kDouble).view(shape).to(torch::kFloat);
}

inline torch::Tensor tokens_from_json(const nlohmann::json& j) {
  std::vector<int64_t> flat;
  for (const auto& row : j)
    for (const auto& v : row) flat.push_back(v.get<int64_t>());
  return torch::tensor(flat).view({static_cast<int64_t>(j.size()), -1});
}

// Loads fixture case `c`'s weights into `model` (every parameter, and no others in the fixture)
// and requires its logits on the case's inputs within 1e-5 of the largest PyTorch logit.
inline void expect_golden_logits(nmt::Seq2SeqImpl& model, const nlohmann::json& c) {
  model.eval();
  const auto& params = c.at("params");
  size_t loaded = 0;
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model.named_parameters()) {
      ASSERT_TRUE(params.contains(p.key())) << "fixture lacks " << p.key();
      const auto value = tensor_from_json(params.at(p.key()));
      ASSERT_EQ(value.sizes(), p.value().sizes()) << p.key();
      p.value().copy_(value);
      ++loaded;
    }
  }
  EXPECT_EQ(loaded, params.size()) << "the fixture has parameters the model does not";

  torch::NoGradGuard no_grad;
  const auto logits =
      model.forward(tokens_from_json(c.at("src")), tokens_from_json(c.at("tgt_in")));
  const auto expected = tensor_from_json(c.at("logits"));
  ASSERT_EQ(logits.sizes(), expected.sizes());
  const double max_diff = (logits - expected).abs().max().item<double>();
  const double scale = expected.abs().max().item<double>();
  EXPECT_LE(max_diff / scale, 1e-5) << "max abs diff " << max_diff << " of max " << scale;
}

}  // namespace nmt_test
