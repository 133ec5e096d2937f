#include "ckpt/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>

#include <spdlog/spdlog.h>

#include "config/parse.h"
#include "config/print.h"
#include "model/device.h"
#include "util/io.h"
#include "util/util.h"

namespace nmt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
const std::regex kCheckpointName("ckpt-([0-9]{8,})");

std::string checkpoints_dir(const std::string& run_dir) { return run_dir + "/checkpoints"; }

bool is_checkpoint_dir(const std::string& path) {
  return file_exists(path + "/state.json") && file_exists(path + "/model.pt");
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

// torch::save through nmt's checked writer. LibTorch's own file writer throws from its destructor
// when a write fails, which ends the process in std::terminate. This callback never throws: it
// keeps the first failure, swallows the rest, and the error is raised once the archive is done.
template <class Value>
void save_torch(const Value& value, const std::string& path) {
  OutFile out(path, OutFile::Mode::kTruncate);
  std::exception_ptr failure;
  const auto sink = [&](const void* data, size_t size) -> size_t {
    if (!failure) {
      try {
        out.write({static_cast<const char*>(data), size});
      } catch (...) {
        failure = std::current_exception();
      }
    }
    return size;
  };
  wrap_torch_io(path, "write", [&] { torch::save(value, sink); });
  if (failure) std::rethrow_exception(failure);
  out.sync();
  out.close();
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

namespace {
// A checkpoint directory, with its state when resolving it read that already.
struct Resolved {
  std::string dir;
  std::optional<CheckpointState> state;
};

// Of a run's best and averaged checkpoints, the one with the better validation value.
Resolved pick_best_or_averaged(const std::string& best, const std::string& averaged) {
  CheckpointState b = CheckpointState::read(best), a = CheckpointState::read(averaged);
  const auto vb = b.own_valid_value(), va = a.own_valid_value();
  const BestMetric metric = b.best_metric.value_or(BestMetric::kBleu);
  if (!va || a.best_metric != metric) {
    spdlog::info("checkpoint: {} ({} has no validation by {} to compare)", best, averaged,
                 name_of(metric));
    return {best, std::move(b)};
  }
  if (!vb) {
    spdlog::info("checkpoint: {} ({} has no validation value)", averaged, best);
    return {averaged, std::move(a)};
  }
  const bool avg_wins = higher_is_better(metric) ? *va > *vb : *va < *vb;
  spdlog::info("checkpoint: {} (validation {}: averaged {:.4f}, best {:.4f} at step {})",
               avg_wins ? averaged : best, name_of(metric), *va, *vb, b.step);
  return avg_wins ? Resolved{averaged, std::move(a)} : Resolved{best, std::move(b)};
}

Resolved resolve(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("checkpoint not found: " + path);
  if (is_checkpoint_dir(path)) return {path, std::nullopt};
  const std::string best = best_checkpoint_dir(path), averaged = averaged_checkpoint_dir(path);
  const bool has_best = is_checkpoint_dir(best), has_averaged = is_checkpoint_dir(averaged);
  if (has_best && has_averaged) return pick_best_or_averaged(best, averaged);
  if (has_best) return {best, std::nullopt};
  if (has_averaged) return {averaged, std::nullopt};
  const auto all = list_checkpoints(path);
  if (all.empty())
    throw Error("no checkpoint in " + path + " (expected " + path + "/checkpoints/ckpt-*)");
  return {all.back(), std::nullopt};
}
}  // namespace

std::string resolve_checkpoint(const std::string& path) { return resolve(path).dir; }

namespace {
// Writes a checkpoint into a hidden temporary directory, then renames it to final_dir, so a
// directory under that name is always complete. Without an optimizer it is an inference
// checkpoint (best, averaged): no optimizer or RNG state.
void write_checkpoint_dir(const std::string& final_dir, const Config& config, const Vocabs& vocabs,
                          Seq2Seq& model, torch::optim::Optimizer* optimizer,
                          const CheckpointState& state,
                          const std::vector<torch::Tensor>& rank_rng_states = {}) {
  const fs::path final_path(final_dir);
  const std::string dir = final_path.parent_path().string();
  create_directories(dir);
  const std::string tmp_dir =
      dir + "/.tmp-" + final_path.filename().string() + "-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);
  create_directories(tmp_dir);
  try {
    save_torch(model, tmp_dir + "/model.pt");
    if (optimizer != nullptr) {
      save_torch(*optimizer, tmp_dir + "/optimizer.pt");
      save_torch(cpu_generator_state(), tmp_dir + "/rng.pt");
      // One process's generator is rng.pt already.
      if (rank_rng_states.size() > 1) save_torch(rank_rng_states, tmp_dir + "/rng_ranks.pt");
      // A model on a GPU: its generators too (one per device), for exact resumes there.
      if (model->device().is_cuda()) save_torch(cuda_generator_states(), tmp_dir + "/rng_cuda.pt");
    }
    // Inside the temporary directory a plain write is enough: the directory is renamed whole.
    write_file_synced(tmp_dir + "/config.json", config_to_json(config) + "\n");
    write_vocabs(tmp_dir, vocabs);
    // state.json is written last: its presence marks the directory's content complete.
    write_file_synced(tmp_dir + "/state.json", state.to_json().dump(2) + "\n");
    fsync_dir(tmp_dir);
    replace_directory(tmp_dir, final_dir);
  } catch (...) {
    // A failed save leaves the checkpoints before it as they were and no partial directory
    // (what removal cannot take, --resume removes).
    fs::remove_all(tmp_dir, ec);
    throw;
  }
  fsync_dir(dir);
}
}  // namespace

namespace {
// torch::load replaces parameters with whatever shapes the file holds, so a vocabulary or config
// that does not match the weights would only fail later, deep inside a forward pass (or not at
// all). Every shape is checked against the model the config and vocabularies describe.
void load_weights(Seq2Seq& model, const std::string& path) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  for (const auto& p : model->named_parameters())
    expected.emplace_back(p.key(), p.value().sizes().vec());
  const torch::Device device = model->device();
  wrap_torch_io(path, "load", [&] { torch::load(model, path, device); });
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

std::vector<std::string> best_validated_checkpoints(const std::string& run_dir, int64_t count,
                                                    bool higher_is_better) {
  std::vector<std::pair<double, std::string>> scored;
  for (const auto& dir : list_checkpoints(run_dir)) {
    if (const auto v = CheckpointState::read(dir).own_valid_value())
      scored.emplace_back(higher_is_better ? -*v : *v, dir);
  }
  // Ties go to the newer checkpoint.
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) {
    return x.first < y.first || (x.first == y.first && x.second > y.second);
  });
  std::vector<std::string> out;
  for (const auto& [v, dir] : scored) {
    if (static_cast<int64_t>(out.size()) == count) break;
    out.push_back(dir);
  }
  return out;
}

std::string save_checkpoint(const std::string& run_dir, int64_t step, const Config& config,
                            const Vocabs& vocabs, Seq2Seq& model,
                            torch::optim::Optimizer& optimizer, const CheckpointState& state,
                            const Retention& retention,
                            const std::vector<torch::Tensor>& rank_rng_states) {
  if (!is_main_process()) return "";
  std::ostringstream name;
  name << "ckpt-" << std::setw(8) << std::setfill('0') << step;
  const std::string final_dir = checkpoints_dir(run_dir) + "/" + name.str();
  write_checkpoint_dir(final_dir, config, vocabs, model, &optimizer, state, rank_rng_states);
  // Older checkpoints go only once the new one is complete.
  auto all = list_checkpoints(run_dir);
  const auto best =
      retention.keep_best > 0
          ? best_validated_checkpoints(run_dir, retention.keep_best, retention.higher_is_better)
          : std::vector<std::string>{};
  for (size_t i = 0; i + static_cast<size_t>(retention.keep_last) < all.size(); ++i) {
    if (std::find(best.begin(), best.end(), all[i]) != best.end()) continue;
    std::error_code ec;
    fs::remove_all(all[i], ec);
    if (ec) throw_io_error("remove", all[i], ec.value());
  }
  return final_dir;
}

std::string best_checkpoint_dir(const std::string& run_dir) {
  return checkpoints_dir(run_dir) + "/best";
}

std::string averaged_checkpoint_dir(const std::string& run_dir) {
  return checkpoints_dir(run_dir) + "/averaged";
}

std::string save_model_checkpoint(const std::string& dir, const Config& config,
                                  const Vocabs& vocabs, Seq2Seq& model,
                                  const CheckpointState& state) {
  if (!is_main_process()) return "";
  write_checkpoint_dir(dir, config, vocabs, model, nullptr, state);
  return dir;
}

Config read_checkpoint_config(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/config.json";
  if (!file_exists(path)) throw Error("checkpoint " + ckpt_dir + " has no config.json");
  return parse_config(read_file(path), {}, path);
}

CheckpointState load_training_state(const std::string& ckpt_dir, Seq2Seq& model,
                                    torch::optim::Optimizer& optimizer, bool load_optimizer,
                                    int rank) {
  CheckpointState st = CheckpointState::read(ckpt_dir);
  if (!file_exists(ckpt_dir + "/optimizer.pt"))
    throw Error(ckpt_dir +
                " holds no optimizer state (a best or averaged checkpoint): resume "
                "from a ckpt-* directory");
  load_weights(model, ckpt_dir + "/model.pt");
  const torch::Device device = model->device();
  if (load_optimizer)
    wrap_torch_io(ckpt_dir + "/optimizer.pt", "load",
                  [&] { torch::load(optimizer, ckpt_dir + "/optimizer.pt", device); });
  // Rank r of a data-parallel run continues its own generator; rank 0's is rng.pt.
  const std::string ranks_rng = ckpt_dir + "/rng_ranks.pt";
  if (rank > 0 && file_exists(ranks_rng)) {
    std::vector<torch::Tensor> states;
    wrap_torch_io(ranks_rng, "load", [&] { torch::load(states, ranks_rng); });
    if (static_cast<size_t>(rank) < states.size()) set_cpu_generator_state(states[rank]);
  } else if (rank == 0) {
    torch::Tensor rng_state;
    wrap_torch_io(ckpt_dir + "/rng.pt", "load",
                  [&] { torch::load(rng_state, ckpt_dir + "/rng.pt"); });
    set_cpu_generator_state(rng_state);
  }
  // The CUDA generators matter only where they run.
  const std::string cuda_rng = ckpt_dir + "/rng_cuda.pt";
  if (device.is_cuda() && file_exists(cuda_rng)) {
    std::vector<torch::Tensor> states;
    wrap_torch_io(cuda_rng, "load", [&] { torch::load(states, cuda_rng, torch::kCPU); });
    set_cuda_generator_states(states);
  }
  return st;
}

LoadedModel load_model(const std::string& checkpoint_or_run_dir, const torch::Device& device) {
  LoadedModel out;
  Resolved r = resolve(checkpoint_or_run_dir);
  out.dir = r.dir;
  // Refuses other format versions and corrupt state.
  out.state = r.state ? std::move(*r.state) : CheckpointState::read(out.dir);
  out.config = read_checkpoint_config(out.dir);
  out.vocabs = read_vocabs(out.dir, out.config.vocab.joint);
  out.model = make_model(out.config.model, out.vocabs.src.size(), out.vocabs.tgt.size());
  out.model->to(device);
  load_weights(out.model, out.dir + "/model.pt");
  out.model->eval();
  return out;
}

AveragedModel average_models(const std::vector<std::string>& dirs, const torch::Device& device) {
  if (dirs.empty()) throw Error("average: no checkpoints given");
  AveragedModel out;
  out.loaded = load_model(dirs.front(), device);
  const LoadedModel& base = out.loaded;
  torch::NoGradGuard no_grad;
  // Sums in double so the order of the checkpoints does not change the result.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> sums;  // (target, running sum)
  for (const auto& t : base.model->saved_tensors()) sums.emplace_back(t, t.to(torch::kDouble));
  out.step = base.state.step;
  out.from = {base.dir};
  for (size_t i = 1; i < dirs.size(); ++i) {
    LoadedModel other = load_model(dirs[i], device);
    if (!same_model_config(other.config.model, base.config.model))
      throw Error("average: " + other.dir + " has another model section than " + base.dir);
    if (other.vocabs.src.bytes() != base.vocabs.src.bytes() ||
        other.vocabs.tgt.bytes() != base.vocabs.tgt.bytes())
      throw Error("average: " + other.dir + " has another vocabulary than " + base.dir);
    const auto others = other.model->saved_tensors();
    for (size_t k = 0; k < sums.size(); ++k) sums[k].second += others[k].to(torch::kDouble);
    out.step = std::max(out.step, other.state.step);
    out.from.push_back(other.dir);
  }
  const double n = static_cast<double>(dirs.size());
  for (auto& [target, sum] : sums) target.copy_(sum / n);
  out.loaded.dir.clear();
  return out;
}

std::string average_checkpoints(const std::vector<std::string>& dirs, const std::string& output) {
  AveragedModel avg = average_models(dirs);
  CheckpointState state;
  state.step = avg.step;
  state.averaged_from = avg.from;
  return save_model_checkpoint(output, avg.loaded.config, avg.loaded.vocabs, avg.loaded.model,
                               state);
}

bool is_average_of(const std::string& run_dir, const std::vector<std::string>& dirs) {
  const std::string avg = averaged_checkpoint_dir(run_dir);
  if (dirs.size() < 2 || !file_exists(avg + "/state.json")) return false;
  const auto from = CheckpointState::read(avg).averaged_from;
  if (from.size() != dirs.size()) return false;
  auto name = [](const std::string& p) { return std::filesystem::path(p).filename().string(); };
  for (size_t i = 0; i < dirs.size(); ++i)
    if (name(from[i]) != name(dirs[i])) return false;
  return true;
}

}  // namespace nmt
