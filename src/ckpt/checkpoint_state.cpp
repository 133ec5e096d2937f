#include "ckpt/checkpoint_state.h"

#include "util/util.h"

namespace nmt {

using nlohmann::json;

std::optional<double> CheckpointState::own_valid_value() const {
  if (has_valid_value && validated_step == step) return valid_value;
  // A best checkpoint from before valid_value existed has it as best_value only.
  if (saved_best_value && averaged_from.empty()) return saved_best_value;
  return std::nullopt;
}

json CheckpointState::to_json() const {
  json j = {{"format_version", kCheckpointFormatVersion}, {"step", step}};
  if (averaged_from.empty()) {
    j["epoch"] = epoch;
    j["batch_in_epoch"] = batch_in_epoch;
    j["tgt_tokens"] = tgt_tokens;
    j["elapsed_s"] = elapsed_s;
    j["best"] = has_best ? json{{"value", best_value}, {"step", best_step}} : json(nullptr);
    j["validations_without_improvement"] = validations_without_improvement;
    j["validated_step"] = validated_step;
  } else {
    j["averaged_from"] = averaged_from;
    if (has_valid_value) j["validated_step"] = validated_step;
  }
  // A checkpoint saved at its validation step carries its score (train.average_best ranks by it).
  if (has_valid_value) j["valid_value"] = valid_value;
  if (world_size > 1) j["world_size"] = world_size;  // one process: the format as before
  if (loss_scale > 0) {
    j["loss_scale"] = loss_scale;
    j["loss_scale_good_steps"] = loss_scale_good_steps;
  }
  if (best_metric) j["best_metric"] = name_of(*best_metric);
  if (saved_best_value) j["best_value"] = *saved_best_value;
  return j;
}

namespace {

void read_trainer_fields(const json& st, CheckpointState& s) {
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
}

}  // namespace

CheckpointState CheckpointState::from_json(const json& st, const std::string& origin) {
  if (!st.is_object() || st.value("format_version", json(kCheckpointFormatVersion)) !=
                             json(kCheckpointFormatVersion))
    throw Error(origin + ": unsupported checkpoint format version " +
                (st.is_object() ? st.value("format_version", json(0)).dump() : st.dump()));
  CheckpointState s;
  try {
    s.step = st.at("step").get<int64_t>();
    if (st.contains("averaged_from"))
      s.averaged_from = st.at("averaged_from").get<std::vector<std::string>>();
    else
      read_trainer_fields(st, s);
    s.validated_step = st.value("validated_step", int64_t{-1});
    s.has_valid_value = st.contains("valid_value");
    s.valid_value = st.value("valid_value", 0.0);
    s.world_size = st.value("world_size", int64_t{1});
    s.loss_scale = st.value("loss_scale", 0.0);
    s.loss_scale_good_steps = st.value("loss_scale_good_steps", int64_t{0});
    if (st.contains("best_metric"))
      s.best_metric = parse_choice<BestMetric>(st.at("best_metric").get<std::string>(),
                                               origin + ": best_metric");
    if (st.contains("best_value")) s.saved_best_value = st.at("best_value").get<double>();
  } catch (const json::exception& e) {
    throw Error("corrupt " + origin + ": " + e.what());
  }
  return s;
}

CheckpointState CheckpointState::read(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/state.json";
  json st;
  try {
    st = json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw Error("corrupt " + path + ": " + e.what());
  }
  if (!st.is_object() || st.value("format_version", 0) != kCheckpointFormatVersion)
    throw Error(path + ": unsupported checkpoint format version " +
                (st.is_object() ? st.value("format_version", json(0)).dump() : st.dump()));
  return from_json(st, path);
}

}  // namespace nmt
