#include "train/state.h"

#include "util/util.h"

namespace nmt {

using nlohmann::json;

json TrainerState::to_json() const {
  json j = {{"step", step},
            {"epoch", epoch},
            {"batch_in_epoch", batch_in_epoch},
            {"tgt_tokens", tgt_tokens},
            {"elapsed_s", elapsed_s},
            {"best", has_best ? json{{"value", best_value}, {"step", best_step}} : json(nullptr)},
            {"validations_without_improvement", validations_without_improvement},
            {"validated_step", validated_step}};
  // A checkpoint saved at its validation step carries its score (train.average_best ranks by it).
  if (has_valid_value) j["valid_value"] = valid_value;
  if (world_size > 1) j["world_size"] = world_size;  // one process: the format as before
  if (loss_scale > 0) {
    j["loss_scale"] = loss_scale;
    j["loss_scale_good_steps"] = loss_scale_good_steps;
  }
  return j;
}

TrainerState TrainerState::from_json(const json& st, const std::string& origin) {
  TrainerState s;
  try {
    s.step = st.at("step").get<int64_t>();
    s.epoch = st.at("epoch").get<int64_t>();
    s.batch_in_epoch = st.at("batch_in_epoch").get<int64_t>();
    s.tgt_tokens = st.at("tgt_tokens").get<int64_t>();
    s.elapsed_s = st.at("elapsed_s").get<double>();
    if (st.contains("best") && st.at("best").is_object()) {
      s.has_best = true;
      s.best_value = st.at("best").at("value").get<double>();
      s.best_step = st.at("best").at("step").get<int64_t>();
    }
    s.validations_without_improvement = st.value("validations_without_improvement", int64_t{0});
    s.validated_step = st.value("validated_step", int64_t{-1});
    s.has_valid_value = st.contains("valid_value");
    s.valid_value = st.value("valid_value", 0.0);
    s.world_size = st.value("world_size", int64_t{1});
    s.loss_scale = st.value("loss_scale", 0.0);
    s.loss_scale_good_steps = st.value("loss_scale_good_steps", int64_t{0});
  } catch (const json::exception& e) {
    throw Error("corrupt " + origin + ": " + e.what());
  }
  return s;
}

}  // namespace nmt
