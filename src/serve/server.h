// `nmt serve`'s HTTP front over cpp-httplib: the routes (POST /translate, GET /health, /ready,
// /models, /metrics), the limits (payload, texts, queue, deadline), the API key, and the drain on
// stop(). How a request's texts are translated is the command's (cli), given as a resolver per
// model, so the server carries no decoding rules of its own: the options go through translate's
// code, and results are written with translate's values (decode/output.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "decode/output.h"
#include "decode/translate.h"
#include "serve/batcher.h"
#include "serve/request.h"

namespace nmt {

class ServeMetrics;

// How one request's texts are translated, resolved from its options.
struct ServeJob {
  // Requests whose jobs have equal keys may share batches; "" shares with none (terms per text,
  // sampling streams keyed by the text's index, HTML whose markup may fail alone).
  std::string key;
  // Translates units (texts, or parts of one request's texts) in order; `first` is the index of
  // units[0] among its request's texts when the key is "" (0 otherwise).
  std::function<std::vector<Translation>(const std::vector<std::string>& units, int64_t first)>
      translate;
  std::function<int64_t(const std::string& unit)> tokens;  // source tokens, for the budget
  OutputOptions output;                                    // scores; document units
  AlignmentMode alignment = AlignmentMode::kNone;
};

struct ServedModel {
  std::string name;
  std::string info;  // GET /models' JSON object for it (its checkpoint, languages, options)
  // The request's job; throws HttpError 400 (or Error, answered 400) for options it refuses.
  std::function<std::shared_ptr<const ServeJob>(const TranslateRequest& request)> resolve;
};

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port (bind() says which)
  int http_threads = 64;               // connections served at once (keep-alive holds one)
  int64_t max_pending = 256;           // accepted connections waiting for a thread; more: 429
  int64_t max_payload_bytes = 10 << 20;  // a larger body is answered 413
  RequestLimits request;               // texts per request, characters per text (413)
  Batcher::Limits batcher;             // batch budget, delay, queue length (429)
  std::chrono::milliseconds deadline{60000};  // a request's answer; later: 504 with what is done
  int keep_alive_seconds = 5;          // an idle keep-alive connection is closed after it
  int keep_alive_requests = 100;       // requests on one connection, then it is closed
  int io_timeout_seconds = 10;         // reading a request, writing an answer
  std::string api_key;                 // "": none; else "Authorization: Bearer KEY" but /health
  bool log_requests = false;           // log every request's body and answer (off: method, path)
};

class Server {
 public:
  Server(ServeOptions options, std::vector<ServedModel> models);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns its port. Throws Error when it cannot.
  int bind();
  // Serves until stop(): then stops accepting, answers every request it has read (a keep-alive
  // connection is closed after its current request) and returns. Call bind() first. Batches
  // are translated on the calling thread, which must be the one that set LibTorch's threads.
  void listen();
  // From any thread (a signal watcher): listen() starts draining. /ready answers 503 from here.
  void stop();
  ServeMetrics& metrics();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Equal strings, in a time that depends on their lengths only (API keys).
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace nmt
