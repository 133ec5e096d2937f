// Dynamic batching across requests (`nmt serve`): every request's units (sentences, or document
// paragraphs) join one queue, and a worker translates them in batches of units that share their
// options, up to a token budget. The worker waits for more work (at most max_delay after the
// oldest request arrived or the last batch ended) only while a full batch cannot be formed and
// other requests are about (Triton's rule, without the delay when one client is alone: its
// request goes at once). Units are taken from the waiting requests
// in turn, so a long request does not starve short ones.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "decode/translate.h"

namespace nmt {

class ServeMetrics;
struct BatcherRequest;  // serve/batcher.cpp

// The queue is full (HTTP 429), or the batcher is stopping (503).
struct Overloaded : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Stopping : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Batcher {
 public:
  // Translates units that share `key`'s options: one result per unit, in order.
  using Translate = std::function<std::vector<Translation>(const std::string& key,
                                                           const std::vector<std::string>& units)>;
  struct Limits {
    int64_t batch_tokens = 4096;                // source tokens of one batch
    std::chrono::microseconds max_delay{5000};  // the longest wait for a fuller batch
    int64_t max_queue = 10000;                  // units waiting; more is Overloaded
  };

  // A submitted request, for withdraw().
  class Ticket {
    friend class Batcher;
    std::shared_ptr<BatcherRequest> request_;
  };

  // With `own_thread` false, nothing is translated until a thread calls work().
  Batcher(Limits limits, Translate translate, ServeMetrics* metrics = nullptr,
          bool own_thread = true);
  ~Batcher();  // stop(), then waits for the worker
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues one request's units (tokens[i]: unit i's source tokens) under `key`: requests with
  // equal keys may share batches. The future gives one result per unit, or the exception the
  // translation threw. Throws Overloaded when the queue cannot take them all, Stopping after
  // stop(). `ticket`, when given, names the request for withdraw().
  std::future<std::vector<Translation>> submit(std::string key, std::vector<std::string> units,
                                               std::vector<int64_t> tokens,
                                               Ticket* ticket = nullptr);
  // Gives up on a request (its deadline passed): its units still queued leave the queue, its
  // future is never set, and the results of the units already finished are returned (nullopt
  // for the others). Units in a running batch finish unseen.
  std::vector<std::optional<Translation>> withdraw(const Ticket& ticket);
  // Refuses new work; what is queued is still translated. Returns at once.
  void stop();
  // Waits until every queued unit is translated (after stop()) or `timeout` passes; true when
  // all were.
  bool drain(std::chrono::milliseconds timeout);
  int64_t queued() const;
  // Translates on the calling thread until stop() and the queue is empty (own_thread false).
  // LibTorch runs its ops on all its threads only from the thread that set their number (the
  // main thread); from another it used one core.
  void work();

 private:
  using Request = BatcherRequest;
  struct Taken {
    std::shared_ptr<Request> request;
    size_t unit = 0;
  };
  void run();
  std::chrono::steady_clock::time_point wait_start() const;
  bool should_wait() const;
  std::vector<Taken> take_batch();
  void finish(std::vector<Taken>& batch, std::vector<Translation>* results,
              std::exception_ptr error);

  const Limits limits_;
  const Translate translate_;
  ServeMetrics* metrics_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, drained_;
  std::deque<std::shared_ptr<Request>> waiting_;  // requests with units not taken yet
  int64_t queued_ = 0;                            // units not taken yet
  int64_t in_flight_ = 0;                         // units taken, not finished
  size_t last_batch_requests_ = 0;  // requests the last batch served: load is about when > 1
  std::chrono::steady_clock::time_point last_batch_end_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace nmt
