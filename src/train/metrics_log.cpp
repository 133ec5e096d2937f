#include "train/metrics_log.h"

#include <cstdio>

#include <algorithm>
#include <cmath>

#include "util/util.h"

namespace nmt {

using nlohmann::json;

namespace {
double ratio(int64_t cells, int64_t tokens) {
  return static_cast<double>(cells) / static_cast<double>(std::max<int64_t>(1, tokens));
}
}  // namespace

json to_json(const TrainRow& r) {
  json j = {{"step", r.step},
            {"epoch", r.epoch},
            {"loss", r.loss},
            {"ppl", r.ppl},
            {"lr", r.lr},
            {"grad_norm", r.grad_norm},
            {"tgt_tokens", r.tgt_tokens},
            {"tok_per_s", r.tok_per_s},
            {"elapsed_s", r.elapsed_s},
            {"data_s", r.phases.data},
            {"forward_s", r.phases.forward},
            {"backward_s", r.phases.backward},
            {"update_s", r.phases.update},
            {"src_pad_ratio", r.src_pad_ratio},
            {"tgt_pad_ratio", r.tgt_pad_ratio}};
  // Only data-parallel runs wait for all-reduces; one process keeps the row as it was.
  if (r.phases.sync > 0) j["sync_s"] = r.phases.sync;
  return j;
}

namespace {
constexpr const char* kValidPrefix = "valid_";
}

json to_json(const ValidRow& r) {
  json j = r.scores.to_json(kValidPrefix);
  j["step"] = r.step;
  j["best"] = r.best;
  if (!r.checkpoint.empty()) j["checkpoint"] = r.checkpoint;
  if (r.elapsed_s) j["elapsed_s"] = *r.elapsed_s;
  return j;
}

Metrics read_metrics(const std::string& path) {
  Metrics m;
  if (!file_exists(path)) return m;
  for (const auto& line : read_lines(path)) {
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step")) continue;
    try {
      if (j.contains("loss")) {
        TrainRow r;
        r.step = j.at("step").get<int64_t>();
        r.epoch = j.value("epoch", int64_t{0});
        r.loss = j.at("loss").get<double>();
        r.ppl = j.value("ppl", 0.0);
        r.lr = j.value("lr", 0.0);
        r.grad_norm = j.value("grad_norm", 0.0);
        r.tgt_tokens = j.value("tgt_tokens", int64_t{0});
        r.tok_per_s = j.value("tok_per_s", 0.0);
        r.elapsed_s = j.value("elapsed_s", 0.0);
        r.phases.data = j.value("data_s", 0.0);
        r.phases.forward = j.value("forward_s", 0.0);
        r.phases.backward = j.value("backward_s", 0.0);
        r.phases.update = j.value("update_s", 0.0);
        r.phases.sync = j.value("sync_s", 0.0);
        r.src_pad_ratio = j.value("src_pad_ratio", 0.0);
        r.tgt_pad_ratio = j.value("tgt_pad_ratio", 0.0);
        m.train.push_back(r);
      } else if (j.contains(std::string(kValidPrefix) + "loss")) {
        ValidRow r;
        r.step = j.at("step").get<int64_t>();
        r.scores = EvalScores::from_json(j, kValidPrefix);
        r.best = j.value("best", false);
        r.checkpoint = j.value("checkpoint", std::string());
        if (j.contains("elapsed_s")) r.elapsed_s = j.at("elapsed_s").get<double>();
        m.valid.push_back(r);
      }
    } catch (const json::exception&) {
      // A row of the wrong types (hand-edited, truncated): skipped like an unreadable line.
    }
  }
  return m;
}

void Interval::restart() {
  start_ = std::chrono::steady_clock::now();
  tokens_ = src_cells_ = tgt_cells_ = src_tokens_ = tgt_tokens_ = 0;
  loss_ = nll_ = lr_ = grad_norm_ = 0;
  phases_ = PhaseTimes{};
}

void Interval::add(const std::vector<TensorBatch>& batches, const StepResult& step, double lr) {
  for (const auto& b : batches) {
    src_cells_ += b.src.numel();
    tgt_cells_ += b.tgt_out.numel();
    src_tokens_ += b.src_tokens;
    tgt_tokens_ += b.tgt_tokens;
  }
  phases_ += step.times;
  if (step.status != StepResult::Status::kApplied) return;
  tokens_ += step.tgt_tokens;
  loss_ += step.loss;
  nll_ += step.nll;
  lr_ = lr;
  grad_norm_ = step.grad_norm;
}

TrainRow Interval::close(int64_t step, int64_t epoch, double elapsed_s) {
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double tok = static_cast<double>(std::max<int64_t>(1, tokens_));
  TrainRow r;
  r.step = step;
  r.epoch = epoch;
  r.loss = loss_ / tok;
  r.ppl = std::exp(nll_ / tok);
  r.lr = lr_;
  r.grad_norm = grad_norm_;
  r.tgt_tokens = tokens_;
  r.tok_per_s = static_cast<double>(tokens_) / std::max(secs, 1e-9);
  r.elapsed_s = elapsed_s;
  r.phases = phases_;
  r.src_pad_ratio = ratio(src_cells_, src_tokens_);
  r.tgt_pad_ratio = ratio(tgt_cells_, tgt_tokens_);
  restart();
  return r;
}

MetricsFile::MetricsFile(std::string path, int64_t keep_through_step) : path_(std::move(path)) {
  if (file_exists(path_)) {
    std::string kept;
    for (const auto& line : read_lines(path_)) {
      const json row = json::parse(line, nullptr, false);
      if (row.is_object() && row.value("step", int64_t{0}) <= keep_through_step)
        kept += line + "\n";
    }
    write_file_atomic(path_, kept);
  }
  out_ = OutFile(path_, OutFile::Mode::kAppend);
}

void MetricsFile::write(const json& row) {
  out_.write(row.dump() + "\n");
  out_.flush();
}

std::string progress_line(int64_t step, int64_t epoch, double loss, double lr, double eta_seconds) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "step %lld | epoch %lld | loss %.3f | lr %.2e | ETA %s",
                static_cast<long long>(step), static_cast<long long>(epoch), loss, lr,
                format_duration(eta_seconds).c_str());
  return buf;
}

}  // namespace nmt
