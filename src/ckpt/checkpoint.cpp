#include "ckpt/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "util/util.h"

namespace nmt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kFormatVersion = 1;
const std::regex kCheckpointName("ckpt-([0-9]{8,})");

std::string checkpoints_dir(const std::string& run_dir) { return run_dir + "/checkpoints"; }

bool is_checkpoint_dir(const std::string& path) {
  return file_exists(path + "/state.json") && file_exists(path + "/model.pt");
}

// fsync a file written by LibTorch, which does not.
void sync_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw Error("cannot reopen " + path);
  ::fsync(::fileno(f));
  std::fclose(f);
}

template <class Fn>
void wrap_torch_io(const std::string& path, const char* what, Fn&& fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw Error(std::string("cannot ") + what + " " + path + ": " + msg.substr(0, msg.find('\n')));
  }
}
}  // namespace

std::vector<std::string> list_checkpoints(const std::string& run_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  const std::string dir = checkpoints_dir(run_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !std::regex_match(name, m, kCheckpointName)) continue;
    if (!is_checkpoint_dir(entry.path().string())) continue;
    found.emplace_back(std::stoll(m[1].str()), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

int remove_partial_checkpoints(const std::string& run_dir) {
  const std::string dir = checkpoints_dir(run_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind(".tmp-", 0) == 0) {
      fs::remove_all(entry.path(), ec);
      ++removed;
    }
  }
  return removed;
}

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("checkpoint not found: " + path);
  if (is_checkpoint_dir(path)) return path;
  if (is_checkpoint_dir(best_checkpoint_dir(path))) return best_checkpoint_dir(path);
  const auto all = list_checkpoints(path);
  if (all.empty())
    throw Error("no checkpoint in " + path + " (expected " + path + "/checkpoints/ckpt-*)");
  return all.back();
}

void write_vocabs(const std::string& dir, const Vocabs& vocabs) {
  if (vocabs.joint) {
    write_file_atomic(dir + "/spm.model", vocabs.src.bytes());
  } else {
    write_file_atomic(dir + "/spm.src.model", vocabs.src.bytes());
    write_file_atomic(dir + "/spm.tgt.model", vocabs.tgt.bytes());
  }
}

namespace {
// Writes a checkpoint into a hidden temporary directory, then renames it to final_dir, so a
// directory under that name is always complete. Without an optimizer it is an inference
// checkpoint (best, averaged): no optimizer or RNG state.
void write_checkpoint_dir(const std::string& final_dir, const Config& config, const Vocabs& vocabs,
                          Transformer& model, torch::optim::Optimizer* optimizer,
                          const TrainerState& state, const json& extra) {
  const fs::path final_path(final_dir);
  const std::string dir = final_path.parent_path().string();
  fs::create_directories(dir);
  const std::string tmp_dir =
      dir + "/.tmp-" + final_path.filename().string() + "-" + std::to_string(::getpid());
  fs::remove_all(tmp_dir);
  fs::create_directories(tmp_dir);

  wrap_torch_io(tmp_dir + "/model.pt", "write", [&] { torch::save(model, tmp_dir + "/model.pt"); });
  sync_file(tmp_dir + "/model.pt");
  if (optimizer != nullptr) {
    wrap_torch_io(tmp_dir + "/optimizer.pt", "write",
                  [&] { torch::save(*optimizer, tmp_dir + "/optimizer.pt"); });
    torch::Tensor rng_state;
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      rng_state = gen.get_state();
    }
    wrap_torch_io(tmp_dir + "/rng.pt", "write",
                  [&] { torch::save(rng_state, tmp_dir + "/rng.pt"); });
    for (const char* f : {"/optimizer.pt", "/rng.pt"}) sync_file(tmp_dir + f);
  }
  write_file_atomic(tmp_dir + "/config.json", config_to_json(config) + "\n");
  write_vocabs(tmp_dir, vocabs);
  json st = {{"format_version", kFormatVersion},
             {"step", state.step},
             {"epoch", state.epoch},
             {"batch_in_epoch", state.batch_in_epoch},
             {"tgt_tokens", state.tgt_tokens},
             {"elapsed_s", state.elapsed_s},
             {"best", state.has_best ? json{{"value", state.best_value}, {"step", state.best_step}}
                                     : json(nullptr)},
             {"validations_without_improvement", state.validations_without_improvement}};
  for (const auto& [key, value] : extra.items()) st[key] = value;
  // state.json is written last: its presence marks the directory's content complete.
  write_file_atomic(tmp_dir + "/state.json", st.dump(2) + "\n");
  fsync_dir(tmp_dir);

  fs::remove_all(final_dir);
  fs::rename(tmp_dir, final_dir);
  fsync_dir(dir);
}
}  // namespace

namespace {
// torch::load replaces parameters with whatever shapes the file holds, so a vocabulary or config
// that does not match the weights would only fail later, deep inside a forward pass (or not at
// all). Every shape is checked against the model the config and vocabularies describe.
void load_weights(Transformer& model, const std::string& path) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  for (const auto& p : model->named_parameters())
    expected.emplace_back(p.key(), p.value().sizes().vec());
  wrap_torch_io(path, "load", [&] { torch::load(model, path); });
  const auto loaded = model->named_parameters();
  for (const auto& [name, shape] : expected) {
    const auto* t = loaded.find(name);
    if (t == nullptr) throw Error(path + ": parameter " + name + " is missing");
    if (t->sizes().vec() == shape) continue;
    const bool vocab = name.find("embed") != std::string::npos || name.find("out_proj") == 0;
    throw Error(path + ": parameter " + name + " has shape " + c10::str(t->sizes()) +
                " but the checkpoint's config and vocabulary need " +
                c10::str(at::IntArrayRef(shape)) + ": the " + (vocab ? "vocabulary" : "config") +
                " does not match the weights");
  }
}
}  // namespace

std::string save_checkpoint(const std::string& run_dir, const Config& config, const Vocabs& vocabs,
                            Transformer& model, torch::optim::Optimizer& optimizer,
                            const TrainerState& state, int64_t keep_last) {
  if (!is_main_process()) return "";
  std::ostringstream name;
  name << "ckpt-" << std::setw(8) << std::setfill('0') << state.step;
  const std::string final_dir = checkpoints_dir(run_dir) + "/" + name.str();
  write_checkpoint_dir(final_dir, config, vocabs, model, &optimizer, state, json::object());
  auto all = list_checkpoints(run_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < all.size(); ++i) fs::remove_all(all[i]);
  return final_dir;
}

std::string best_checkpoint_dir(const std::string& run_dir) {
  return checkpoints_dir(run_dir) + "/best";
}

std::string save_model_checkpoint(const std::string& dir, const Config& config,
                                  const Vocabs& vocabs, Transformer& model,
                                  const TrainerState& state, const nlohmann::json& extra) {
  if (!is_main_process()) return "";
  write_checkpoint_dir(dir, config, vocabs, model, nullptr, state, extra);
  return dir;
}

nlohmann::json read_checkpoint_state(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/state.json";
  json st;
  try {
    st = json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw Error("corrupt " + path + ": " + e.what());
  }
  if (!st.is_object() || st.value("format_version", 0) != kFormatVersion)
    throw Error(path + ": unsupported checkpoint format version " +
                (st.is_object() ? st.value("format_version", json(0)).dump() : st.dump()));
  return st;
}

Config read_checkpoint_config(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/config.json";
  if (!file_exists(path)) throw Error("checkpoint " + ckpt_dir + " has no config.json");
  return parse_config(read_file(path), {}, path);
}

Vocabs read_checkpoint_vocabs(const std::string& ckpt_dir, bool joint) {
  if (joint) {
    auto sp = SentencePiece::from_file(ckpt_dir + "/spm.model");
    return Vocabs{sp, sp, true};
  }
  return Vocabs{SentencePiece::from_file(ckpt_dir + "/spm.src.model"),
                SentencePiece::from_file(ckpt_dir + "/spm.tgt.model"), false};
}

TrainerState load_training_state(const std::string& ckpt_dir, Transformer& model,
                                 torch::optim::Optimizer& optimizer, bool load_optimizer) {
  const std::string state_path = ckpt_dir + "/state.json";
  const json st = read_checkpoint_state(ckpt_dir);
  if (!file_exists(ckpt_dir + "/optimizer.pt"))
    throw Error(ckpt_dir +
                " holds no optimizer state (a best or averaged checkpoint): resume "
                "from a ckpt-* directory");
  load_weights(model, ckpt_dir + "/model.pt");
  if (load_optimizer)
    wrap_torch_io(ckpt_dir + "/optimizer.pt", "load",
                  [&] { torch::load(optimizer, ckpt_dir + "/optimizer.pt"); });
  torch::Tensor rng_state;
  wrap_torch_io(ckpt_dir + "/rng.pt", "load",
                [&] { torch::load(rng_state, ckpt_dir + "/rng.pt"); });
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng_state);
  }
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
  } catch (const json::exception& e) {
    throw Error("corrupt " + state_path + ": " + e.what());
  }
  return s;
}

LoadedModel load_model(const std::string& checkpoint_or_run_dir) {
  LoadedModel out;
  out.dir = resolve_checkpoint(checkpoint_or_run_dir);
  read_checkpoint_state(out.dir);  // refuses other format versions and corrupt state
  out.config = read_checkpoint_config(out.dir);
  out.vocabs = read_checkpoint_vocabs(out.dir, out.config.vocab.joint);
  out.model = Transformer(out.config.model, out.vocabs.src.size(), out.vocabs.tgt.size());
  load_weights(out.model, out.dir + "/model.pt");
  out.model->eval();
  return out;
}

std::string average_checkpoints(const std::vector<std::string>& dirs, const std::string& output) {
  if (dirs.empty()) throw Error("average: no checkpoints given");
  LoadedModel base = load_model(dirs.front());
  torch::NoGradGuard no_grad;
  // Sums in double so the order of the checkpoints does not change the result.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> sums;  // (target, running sum)
  auto targets = base.model->parameters();
  for (const auto& b : base.model->buffers()) targets.push_back(b);
  for (const auto& t : targets) sums.emplace_back(t, t.to(torch::kDouble));
  int64_t step = read_checkpoint_state(base.dir).value("step", int64_t{0});
  std::vector<std::string> used{base.dir};
  for (size_t i = 1; i < dirs.size(); ++i) {
    LoadedModel other = load_model(dirs[i]);
    if (!same_model_config(other.config.model, base.config.model))
      throw Error("average: " + other.dir + " has another model section than " + base.dir);
    if (other.vocabs.src.bytes() != base.vocabs.src.bytes() ||
        other.vocabs.tgt.bytes() != base.vocabs.tgt.bytes())
      throw Error("average: " + other.dir + " has another vocabulary than " + base.dir);
    auto others = other.model->parameters();
    for (const auto& b : other.model->buffers()) others.push_back(b);
    for (size_t k = 0; k < sums.size(); ++k) sums[k].second += others[k].to(torch::kDouble);
    step = std::max(step, read_checkpoint_state(other.dir).value("step", int64_t{0}));
    used.push_back(other.dir);
  }
  const double n = static_cast<double>(dirs.size());
  for (auto& [target, sum] : sums) target.copy_(sum / n);
  TrainerState state;
  state.step = step;
  return save_model_checkpoint(output, base.config, base.vocabs, base.model, state,
                               {{"averaged_from", used}});
}

}  // namespace nmt
