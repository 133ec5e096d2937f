#include "serve/server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/metrics.h"
#include "util/util.h"

namespace nmt {

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Every byte of the longer string is read whatever the first difference.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {

using nlohmann::json;

// Set on the overflow thread: its connections are answered 429 at once.
thread_local bool t_overflow = false;

// cpp-httplib's own pool queues connections without a bound. This one serves `threads`
// connections at once and keeps at most `max_pending` waiting; beyond that one overflow thread
// answers each connection 429 without reading its body, and when that thread is behind too the
// accept loop waits (the kernel's listen backlog holds the rest): memory stays bounded.
class BoundedPool : public httplib::TaskQueue {
 public:
  BoundedPool(int threads, size_t max_pending) : max_pending_(max_pending) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(false); });
    threads_.emplace_back([this] { work(true); });
  }
  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (jobs_.size() < max_pending_) {
      jobs_.push_back(std::move(fn));
      jobs_ready_.notify_one();
      return;
    }
    space_.wait(lock, [this] { return overflow_.size() < max_pending_ || shutdown_; });
    overflow_.push_back(std::move(fn));
    overflow_ready_.notify_one();
  }
  // Runs what is queued, then joins the threads.
  void shutdown() override {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      shutdown_ = true;
    }
    jobs_ready_.notify_all();
    overflow_ready_.notify_all();
    space_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void work(bool overflow) {
    t_overflow = overflow;
    auto& queue = overflow ? overflow_ : jobs_;
    auto& ready = overflow ? overflow_ready_ : jobs_ready_;
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready.wait(lock, [&] { return shutdown_ || !queue.empty(); });
        if (queue.empty()) return;
        fn = std::move(queue.front());
        queue.pop_front();
        if (overflow) space_.notify_one();
      }
      fn();
    }
  }

  const size_t max_pending_;
  std::mutex mutex_;
  std::condition_variable jobs_ready_, overflow_ready_, space_;
  std::deque<std::function<void()>> jobs_, overflow_;
  bool shutdown_ = false;
  std::vector<std::thread> threads_;
};

void answer(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                  "application/json");
}

void answer_error(httplib::Response& res, int status, const std::string& message) {
  answer(res, status, json{{"error", message}});
}

// The errors cpp-httplib answers by itself.
std::string status_text(int status) {
  switch (status) {
    case 400: return "bad request";
    case 404:
      return "not found: the routes are POST /translate, GET /health, /ready, /models, /metrics";
    case 405: return "method not allowed";
    case 413: return "payload too large";
    case 414: return "URI too long";
    case 416: return "range not satisfiable";
    default: return "HTTP " + std::to_string(status);
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

struct Server::Impl {
  Impl(ServeOptions o, std::vector<ServedModel> m);

  // The jobs that requests in the queue use, by batcher key, while a request holds them.
  struct JobEntry {
    std::shared_ptr<const ServeJob> job;
    int users = 0;
    int64_t next = 0;  // a request's own key: the index of its next unit to translate
  };
  // Holds a job's entry for one request's life.
  class JobLease {
   public:
    JobLease(Impl& impl, const std::string& model, std::shared_ptr<const ServeJob> job);
    ~JobLease();
    std::string key;

   private:
    Impl& impl_;
  };

  void configure();
  std::vector<Translation> run_batch(const std::string& key,
                                     const std::vector<std::string>& units);
  void translate(const httplib::Request& req, httplib::Response& res);
  void translate_checked(const httplib::Request& req, httplib::Response& res);
  const ServedModel& model_for(const std::string& name) const;
  json results_body(const std::vector<Translation>& results, const ServeJob& job) const;
  httplib::Server::HandlerResponse before_routing(const httplib::Request& req,
                                                  httplib::Response& res) const;

  ServeOptions options;
  std::vector<ServedModel> models;
  ServeMetrics metrics;
  std::mutex jobs_mutex;
  std::map<std::string, JobEntry> jobs;
  int64_t own_keys = 0;  // own keys handed out
  Batcher batcher;       // after the jobs: its worker stops before they go
  std::atomic<bool> stopping{false};
  httplib::Server http;
};

Server::Impl::Impl(ServeOptions o, std::vector<ServedModel> m)
    : options(std::move(o)),
      models(std::move(m)),
      batcher(options.batcher,
              [this](const std::string& key, const std::vector<std::string>& units) {
                return run_batch(key, units);
              },
              &metrics, /*own_thread=*/false) {
  if (models.empty()) throw Error("serve: no model");
  if (options.http_threads < 1) throw Error("--http-threads must be >= 1");
  if (options.max_pending < 1) throw Error("--max-pending must be >= 1");
  if (options.max_payload_bytes < 1) throw Error("--max-payload-bytes must be >= 1");
  if (options.deadline.count() < 1) throw Error("--deadline-ms must be >= 1");
  configure();
}

Server::Impl::JobLease::JobLease(Impl& impl, const std::string& model,
                                 std::shared_ptr<const ServeJob> job)
    : impl_(impl) {
  const std::lock_guard<std::mutex> lock(impl.jobs_mutex);
  key = job->key.empty() ? "#" + std::to_string(impl.own_keys++) : model + "\n" + job->key;
  auto& entry = impl.jobs[key];
  if (!entry.job) entry.job = std::move(job);
  ++entry.users;
}

Server::Impl::JobLease::~JobLease() {
  const std::lock_guard<std::mutex> lock(impl_.jobs_mutex);
  const auto it = impl_.jobs.find(key);
  if (--it->second.users == 0) impl_.jobs.erase(it);
}

// The batcher's worker: one batch of units that share a key. A request's own key translates its
// units in order, so `next` says where each batch starts among its texts. A lease outlives the
// request's units in the queue; a withdrawn request's running batch still finds its entry,
// because the batch holds a copy of the job.
std::vector<Translation> Server::Impl::run_batch(const std::string& key,
                                                 const std::vector<std::string>& units) {
  std::shared_ptr<const ServeJob> job;
  int64_t first = 0;
  {
    const std::lock_guard<std::mutex> lock(jobs_mutex);
    const auto it = jobs.find(key);
    if (it == jobs.end()) return std::vector<Translation>(units.size());  // withdrawn
    job = it->second.job;
    if (key[0] == '#') {
      first = it->second.next;
      it->second.next += static_cast<int64_t>(units.size());
    }
  }
  return job->translate(units, first);
}

const ServedModel& Server::Impl::model_for(const std::string& name) const {
  if (name.empty()) {
    if (models.size() == 1) return models.front();
    std::string names;
    for (const auto& m : models) names += (names.empty() ? "" : ", ") + m.name;
    throw HttpError(400, "\"model\": required when several models are served (" + names + ")");
  }
  for (const auto& m : models)
    if (m.name == name) return m;
  throw HttpError(404, "unknown model \"" + name + "\" (GET /models lists them)");
}

json Server::Impl::results_body(const std::vector<Translation>& results,
                                const ServeJob& job) const {
  json translations = json::array(), scores = json::array(), alignments = json::array();
  for (const auto& t : results) {
    json r = result_json(t, job.output, job.alignment);
    translations.push_back(std::move(r["translation"]));
    if (job.output.scores) scores.push_back(std::move(r["score"]));
    if (job.alignment != AlignmentMode::kNone) alignments.push_back(std::move(r["alignment"]));
  }
  json body = {{"translations", std::move(translations)}};
  if (job.output.scores) body["scores"] = std::move(scores);
  if (job.alignment != AlignmentMode::kNone) body["alignments"] = std::move(alignments);
  return body;
}

void Server::Impl::translate_checked(const httplib::Request& req, httplib::Response& res) {
  const auto start = std::chrono::steady_clock::now();
  const TranslateRequest request = parse_translate_request(req.body, options.request);
  const ServedModel& model = model_for(request.model);
  std::shared_ptr<const ServeJob> job;
  try {
    job = model.resolve(request);
  } catch (const HttpError&) {
    throw;
  } catch (const std::exception& e) {
    throw HttpError(400, e.what());
  }
  std::vector<int64_t> tokens;
  for (const auto& text : request.texts) tokens.push_back(job->tokens(text));
  JobLease lease(*this, model.name, job);
  Batcher::Ticket ticket;
  auto future = batcher.submit(lease.key, request.texts, tokens, &ticket);
  if (future.wait_for(options.deadline) != std::future_status::ready) {
    const auto done = batcher.withdraw(ticket);
    json partial = json::array();
    int64_t finished = 0;
    for (const auto& t : done) {
      partial.push_back(t ? json(result_json(*t, job->output, job->alignment)["translation"])
                          : json(nullptr));
      finished += t.has_value();
    }
    answer(res, 504,
           {{"error", "deadline of " + std::to_string(options.deadline.count()) + " ms passed: " +
                          std::to_string(finished) + " of " + std::to_string(done.size()) +
                          " texts translated"},
            {"translations", std::move(partial)}});
    return;
  }
  const std::vector<Translation> results = future.get();
  int64_t sentences = 0, source_tokens = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    sentences += job->output.document ? static_cast<int64_t>(results[i].sentences.size()) : 1;
    source_tokens += tokens[i];
  }
  metrics.add_translated(sentences, source_tokens);
  answer(res, 200, results_body(results, *job));
  metrics.observe_latency(seconds_since(start));
}

void Server::Impl::translate(const httplib::Request& req, httplib::Response& res) {
  if (options.log_requests) spdlog::info("POST /translate {}", req.body);
  try {
    translate_checked(req, res);
  } catch (const HttpError& e) {
    answer_error(res, e.status, e.what());
  } catch (const Overloaded& e) {
    answer_error(res, 429, e.what());
  } catch (const Stopping& e) {
    answer_error(res, 503, e.what());
  } catch (const std::exception& e) {
    spdlog::error("POST /translate failed: {}", e.what());
    answer_error(res, 500, std::string("translation failed: ") + e.what());
  }
  if (stopping) res.set_header("Connection", "close");
  if (options.log_requests) spdlog::info("answer {}: {}", res.status, res.body);
}

httplib::Server::HandlerResponse Server::Impl::before_routing(const httplib::Request& req,
                                                              httplib::Response& res) const {
  using R = httplib::Server::HandlerResponse;
  if (t_overflow) {
    answer_error(res, 429,
                 "overloaded: " + std::to_string(options.max_pending) + " connections are waiting");
    res.set_header("Connection", "close");
    return R::Handled;
  }
  if (options.api_key.empty() || req.path == "/health") return R::Unhandled;
  const std::string auth = req.get_header_value("Authorization");
  const std::string bearer = "Bearer ";
  if (auth.compare(0, bearer.size(), bearer) == 0 &&
      constant_time_equal(auth.substr(bearer.size()), options.api_key))
    return R::Unhandled;
  answer_error(res, 401, "unauthorized: send \"Authorization: Bearer KEY\"");
  res.set_header("WWW-Authenticate", "Bearer");
  return R::Handled;
}

void Server::Impl::configure() {
  const size_t threads = static_cast<size_t>(options.http_threads);
  const auto pending = static_cast<size_t>(options.max_pending);
  http.new_task_queue = [threads, pending] { return new BoundedPool(threads, pending); };
  http.set_payload_max_length(static_cast<size_t>(options.max_payload_bytes));
  // The library writes an answer's headers and body apart: with Nagle's algorithm the body
  // waits for the client's delayed ACK (40 ms a request on loopback).
  http.set_tcp_nodelay(true);
  http.set_keep_alive_max_count(static_cast<size_t>(options.keep_alive_requests));
  http.set_keep_alive_timeout(options.keep_alive_seconds);
  http.set_read_timeout(options.io_timeout_seconds, 0);
  http.set_write_timeout(options.io_timeout_seconds, 0);
  http.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) {
        return before_routing(req, res);
      });
  http.Post("/translate", [this](const httplib::Request& req, httplib::Response& res) {
    translate(req, res);
  });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    answer(res, 200, {{"status", "ok"}});
  });
  http.Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    if (stopping)
      answer(res, 503, {{"status", "draining"}});
    else
      answer(res, 200, {{"status", "ready"}});
  });
  http.Get("/models", [this](const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const auto& m : models) list.push_back(json::parse(m.info));
    answer(res, 200, {{"models", list}});
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.text(), "text/plain; version=0.0.4");
  });
  // Errors the library answers itself (404, 405, 413, 400) get a JSON body too.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    answer_error(res, res.status,
                 res.status == 413 ? "payload too large: at most " +
                                         std::to_string(options.max_payload_bytes) + " bytes"
                                   : status_text(res.status));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics.count_request(res.status);
    spdlog::debug("{} {} {}", req.method, req.path, res.status);
  });
}

Server::Server(ServeOptions options, std::vector<ServedModel> models)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(models))) {}

Server::~Server() = default;

int Server::bind() {
  auto& o = impl_->options;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host)
                               : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port <= 0)
    throw Error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                " (in use, or not an address of this machine)");
  return port;
}

void Server::listen() {
  std::thread http([this] {
    if (!impl_->stopping) impl_->http.listen_after_bind();
    // Every connection's thread has answered its request: nothing waits on the batcher now.
    impl_->batcher.stop();
  });
  impl_->batcher.work();  // translates on this thread (batcher.h says why)
  http.join();
}

void Server::stop() {
  impl_->stopping = true;
  impl_->http.stop();
}

ServeMetrics& Server::metrics() { return impl_->metrics; }

}  // namespace nmt
