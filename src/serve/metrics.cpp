#include "serve/metrics.h"

#include <algorithm>
#include <cstdio>

namespace nmt {

namespace {

// A number as Prometheus reads it: integers without a fraction, others with up to 9 digits.
std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string header(const std::string& name, const std::string& help, const char* type) {
  return "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto at = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[static_cast<size_t>(at)];
  sum += value;
  ++count;
}

std::string Histogram::text(const std::string& name, const std::string& help) const {
  std::string out = header(name, help, "histogram");
  int64_t cumulative = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    const std::string le = i < bounds.size() ? number(bounds[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum " + number(sum) + "\n";
  out += name + "_count " + std::to_string(count) + "\n";
  return out;
}

ServeMetrics::ServeMetrics()
    : latency_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      batch_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {}

void ServeMetrics::count_request(int status) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[status];
}

void ServeMetrics::observe_latency(double seconds) {
  const std::lock_guard<std::mutex> lock(mutex_);
  latency_.observe(seconds);
}

void ServeMetrics::observe_batch(int64_t sentences) {
  const std::lock_guard<std::mutex> lock(mutex_);
  batch_.observe(static_cast<double>(sentences));
}

void ServeMetrics::add_translated(int64_t sentences, int64_t tokens) {
  const std::lock_guard<std::mutex> lock(mutex_);
  sentences_ += sentences;
  tokens_ += tokens;
}

void ServeMetrics::set_queue_length(int64_t units) {
  const std::lock_guard<std::mutex> lock(mutex_);
  queue_ = units;
}

std::string ServeMetrics::text() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::string out = header("nmt_requests_total", "HTTP requests answered, by status", "counter");
  for (const auto& [status, n] : requests_)
    out += "nmt_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) +
           "\n";
  out += header("nmt_queue_length", "Sentences waiting for a batch", "gauge");
  out += "nmt_queue_length " + std::to_string(queue_) + "\n";
  out += batch_.text("nmt_batch_sentences", "Sentences per translated batch");
  out += latency_.text("nmt_request_seconds", "Time from a request's arrival to its answer");
  out += header("nmt_sentences_total", "Sentences translated", "counter");
  out += "nmt_sentences_total " + std::to_string(sentences_) + "\n";
  out += header("nmt_tokens_total", "Target tokens translated", "counter");
  out += "nmt_tokens_total " + std::to_string(tokens_) + "\n";
  return out;
}

}  // namespace nmt
