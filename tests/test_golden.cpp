// nmt's Transformer against PyTorch's own layers on fixed weights (scripts/make_golden.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/parse.h"
#include "golden_helpers.h"
#include "helpers.h"
#include "model/transformer.h"

using namespace nmt;
using nlohmann::json;

namespace {
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
  nmt_test::expect_golden_logits(*model, c);
}

INSTANTIATE_TEST_SUITE_P(Cases, Golden, ::testing::Values(0, 1, 2));
