// nmt's Transformer against PyTorch's own layers on fixed weights (scripts/make_golden.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "helpers.h"
#include "model/transformer.h"

using namespace nmt;
using nlohmann::json;

namespace {
torch::Tensor from_json(const json& j) {
  const auto shape = j.at("shape").get<std::vector<int64_t>>();
  const auto data = j.at("data").get<std::vector<double>>();
  return torch::tensor(data, torch::kDouble).view(shape).to(torch::kFloat);
}

torch::Tensor tokens(const json& j) {
  std::vector<int64_t> flat;
  for (const auto& row : j)
    for (const auto& v : row) flat.push_back(v.get<int64_t>());
  return torch::tensor(flat).view({static_cast<int64_t>(j.size()), -1});
}

const json& fixture() {
  static const json j =
      json::parse(nmt_test::read_text(nmt_test::source_dir() + "/tests/fixtures/golden.json"));
  return j;
}
}  // namespace

class Golden : public ::testing::TestWithParam<int> {};

TEST_P(Golden, LogitsMatchPyTorchWithin1e5Relative) {
  const json& c = fixture().at("cases").at(GetParam());
  SCOPED_TRACE(c.at("name").get<std::string>());
  json cfg = {{"model", c.at("model")}, {"train", {{"max_steps", 1}}}};
  cfg["model"]["dropout"] = 0.0;
  cfg["model"]["attention_dropout"] = 0.0;
  cfg["data"] = {{"max_len", 8}};
  const Config config = parse_config(cfg.dump());
  Transformer model(config.model, c.at("src_vocab").get<int64_t>(),
                    c.at("tgt_vocab").get<int64_t>());
  model->eval();

  const auto& params = c.at("params");
  size_t loaded = 0;
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) {
      ASSERT_TRUE(params.contains(p.key())) << "fixture lacks " << p.key();
      const auto value = from_json(params.at(p.key()));
      ASSERT_EQ(value.sizes(), p.value().sizes()) << p.key();
      p.value().copy_(value);
      ++loaded;
    }
  }
  EXPECT_EQ(loaded, params.size()) << "the fixture has parameters the model does not";

  torch::NoGradGuard no_grad;
  const auto logits = model->forward(tokens(c.at("src")), tokens(c.at("tgt_in")));
  const auto expected = from_json(c.at("logits"));
  ASSERT_EQ(logits.sizes(), expected.sizes());
  const double max_diff = (logits - expected).abs().max().item<double>();
  const double scale = expected.abs().max().item<double>();
  EXPECT_LE(max_diff / scale, 1e-5) << "max abs diff " << max_diff << " of max " << scale;
}

INSTANTIATE_TEST_SUITE_P(Cases, Golden, ::testing::Values(0, 1, 2));
