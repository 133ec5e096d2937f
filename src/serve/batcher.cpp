#include "serve/batcher.h"

#include <algorithm>
#include <set>

#include "serve/metrics.h"
#include "util/util.h"

namespace nmt {

struct BatcherRequest {
  std::string key;
  std::vector<std::string> units;
  std::vector<int64_t> tokens;
  std::vector<Translation> results;
  size_t next = 0;  // the first unit not taken yet
  size_t done = 0;  // units finished
  std::vector<bool> finished;
  bool failed = false;
  bool withdrawn = false;  // withdraw(): nobody waits for the promise
  std::chrono::steady_clock::time_point arrived;
  std::promise<std::vector<Translation>> promise;
};

Batcher::Batcher(Limits limits, Translate translate, ServeMetrics* metrics, bool own_thread)
    : limits_(limits), translate_(std::move(translate)), metrics_(metrics) {
  if (limits_.batch_tokens < 1) throw Error("batcher: batch_tokens must be >= 1");
  if (limits_.max_queue < 1) throw Error("batcher: max_queue must be >= 1");
  if (own_thread) worker_ = std::thread([this] { run(); });
}

void Batcher::work() { run(); }

Batcher::~Batcher() {
  stop();
  if (worker_.joinable()) worker_.join();
}

std::future<std::vector<Translation>> Batcher::submit(std::string key,
                                                      std::vector<std::string> units,
                                                      std::vector<int64_t> tokens,
                                                      Ticket* ticket) {
  if (tokens.size() != units.size()) throw Error("batcher: one token count per unit expected");
  auto r = std::make_shared<Request>();
  r->key = std::move(key);
  r->units = std::move(units);
  r->tokens = std::move(tokens);
  r->results.resize(r->units.size());
  r->finished.resize(r->units.size());
  if (ticket) ticket->request_ = r;
  r->arrived = std::chrono::steady_clock::now();
  auto future = r->promise.get_future();
  if (r->units.empty()) {
    r->promise.set_value({});
    return future;
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) throw Stopping("the server is shutting down");
  const auto n = static_cast<int64_t>(r->units.size());
  if (queued_ + n > limits_.max_queue)
    throw Overloaded("overloaded: " + std::to_string(queued_) + " sentences are waiting");
  queued_ += n;
  waiting_.push_back(std::move(r));
  if (metrics_) metrics_->set_queue_length(queued_);
  wake_.notify_one();
  return future;
}

void Batcher::stop() {
  const std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  wake_.notify_all();
}

bool Batcher::drain(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return drained_.wait_for(lock, timeout, [this] { return queued_ == 0 && in_flight_ == 0; });
}

std::vector<std::optional<Translation>> Batcher::withdraw(const Ticket& ticket) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto& r = ticket.request_;
  if (!r) throw Error("batcher: withdraw of a request never submitted");
  std::vector<std::optional<Translation>> done(r->units.size());
  for (size_t u = 0; u < r->units.size(); ++u)
    if (r->finished[u]) done[u] = r->results[u];
  if (r->withdrawn) return done;
  r->withdrawn = true;
  const auto left = static_cast<int64_t>(r->units.size() - r->next);
  if (left > 0) {
    queued_ -= left;
    r->next = r->units.size();
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), r), waiting_.end());
    if (metrics_) metrics_->set_queue_length(queued_);
    if (queued_ == 0 && in_flight_ == 0) drained_.notify_all();
  }
  return done;
}

int64_t Batcher::queued() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return queued_;
}

// When the wait for a fuller batch began: the head request's arrival, or the end of the last
// batch when that came later. The clients the last batch answered are likely to send again at
// once; without waiting for them, clients that arrive together split into alternating half
// batches (measured: 15 sentences a batch for 32 clients).
std::chrono::steady_clock::time_point Batcher::wait_start() const {
  return std::max(waiting_.front()->arrived, last_batch_end_);
}

// Whether to wait for more work before taking a batch: the head request's key does not fill a
// batch yet, fewer requests wait than the last batch served, less than max_delay passed since
// wait_start(), and other requests are about (the last batch served several, or several wait):
// a lone client's request goes at once.
bool Batcher::should_wait() const {
  if (stopping_ || waiting_.empty()) return false;
  const auto& head = waiting_.front();
  if (last_batch_requests_ <= 1 && waiting_.size() <= 1) return false;
  // As many requests wait as the last batch served: its clients are back, more is unlikely.
  if (waiting_.size() >= last_batch_requests_) return false;
  if (std::chrono::steady_clock::now() - wait_start() >= limits_.max_delay) return false;
  int64_t tokens = 0;
  for (const auto& r : waiting_)
    if (r->key == head->key)
      for (size_t u = r->next; u < r->units.size(); ++u) tokens += r->tokens[u];
  return tokens < limits_.batch_tokens;
}

// Units of the head request's key, one from each waiting request in turn, while they fit the
// budget (the first always goes, however long).
std::vector<Batcher::Taken> Batcher::take_batch() {
  const std::string key = waiting_.front()->key;
  std::vector<Taken> batch;
  int64_t tokens = 0;
  for (bool took = true; took;) {
    took = false;
    for (const auto& r : waiting_) {
      if (r->key != key || r->next == r->units.size()) continue;
      const int64_t t = r->tokens[r->next];
      if (!batch.empty() && tokens + t > limits_.batch_tokens) return batch;
      batch.push_back({r, r->next++});
      tokens += t;
      took = true;
    }
  }
  return batch;
}

void Batcher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
    if (waiting_.empty()) return;  // stopping, nothing left
    while (should_wait())
      wake_.wait_until(lock, wait_start() + limits_.max_delay);
    if (waiting_.empty()) continue;  // withdrawn while waiting
    auto batch = take_batch();
    queued_ -= static_cast<int64_t>(batch.size());
    in_flight_ += static_cast<int64_t>(batch.size());
    waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(),
                                  [](const auto& r) { return r->next == r->units.size(); }),
                   waiting_.end());
    if (metrics_) metrics_->set_queue_length(queued_);
    lock.unlock();
    std::vector<std::string> units;
    for (const auto& t : batch) units.push_back(t.request->units[t.unit]);
    std::vector<Translation> results;
    std::exception_ptr error;
    try {
      results = translate_(batch.front().request->key, units);
      if (results.size() != units.size()) throw Error("batcher: one result per unit expected");
    } catch (...) {
      error = std::current_exception();
    }
    if (metrics_) metrics_->observe_batch(static_cast<int64_t>(units.size()));
    lock.lock();
    finish(batch, error ? nullptr : &results, error);
  }
}

// Hands each unit's result to its request; a request whose units are all done gets its value
// (or the first error any of its batches had).
void Batcher::finish(std::vector<Taken>& batch, std::vector<Translation>* results,
                     std::exception_ptr error) {
  std::set<Request*> served;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& r = *batch[i].request;
    served.insert(&r);
    if (results) r.results[batch[i].unit] = std::move((*results)[i]);
    r.finished[batch[i].unit] = results != nullptr;
    if (error && !r.failed && !r.withdrawn) {
      r.failed = true;
      r.promise.set_exception(error);
    }
    if (++r.done == r.units.size() && !r.failed && !r.withdrawn)
      r.promise.set_value(std::move(r.results));
  }
  last_batch_requests_ = served.size();
  last_batch_end_ = std::chrono::steady_clock::now();
  in_flight_ -= static_cast<int64_t>(batch.size());
  if (queued_ == 0 && in_flight_ == 0) drained_.notify_all();
}

}  // namespace nmt
