// What `nmt serve` counts, and its Prometheus text exposition (GET /metrics): requests by
// status, the queue's length, batch sizes, request latency, sentences and tokens translated.
// Thread-safe; text() is a pure rendering of the counts, unit-tested by hand.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace nmt {

// A Prometheus histogram: counts per upper bound (cumulative when written), their sum and count.
struct Histogram {
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // The lines of metric `name` (with its HELP and TYPE): name_bucket{le="..."}, _sum, _count.
  std::string text(const std::string& name, const std::string& help) const;

  std::vector<double> bounds;
  std::vector<int64_t> counts;  // per bound, not cumulative; the last is +Inf
  double sum = 0.0;
  int64_t count = 0;
};

class ServeMetrics {
 public:
  ServeMetrics();
  void count_request(int status);
  void observe_latency(double seconds);
  void observe_batch(int64_t sentences);
  void add_translated(int64_t sentences, int64_t tokens);
  void set_queue_length(int64_t units);
  // Prometheus text format 0.0.4.
  std::string text() const;

 private:
  mutable std::mutex mutex_;
  std::map<int, int64_t> requests_;  // by HTTP status
  Histogram latency_, batch_;
  int64_t sentences_ = 0, tokens_ = 0, queue_ = 0;
};

}  // namespace nmt
