// nmt serve: the models of --checkpoint over HTTP (serve/server.h). A request's options are
// resolved by translate's own code (decode_options over the checkpoint's decode section, then
// the document formats' use_document_format), so a request gets what `nmt translate` gives
// with the same flags.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/decode_flags.h"
#include "decode/search.h"
#include "doc/document.h"
#include "serve/server.h"
#include "util/log.h"
#include "util/signals.h"
#include "util/util.h"

namespace nmt {
namespace {

struct ServeArgs {
  std::vector<std::string> checkpoints;  // DIR, or NAME=DIR
  DecodeFlags decode;                    // every request's defaults
  ServeOptions serve;
  int64_t max_delay_ms = 5;
  int64_t deadline_ms = 60000;
  std::string api_key_file;
  std::string source_lang;  // the splitter's language ("": the training data's)
  bool html_lenient = false;
  double drain_timeout = 30.0;  // seconds
};

// One loaded model and what its requests are resolved with.
struct ModelEntry {
  std::string name;
  DecodingModels models;
  DecodeConfig decode;   // the checkpoint's decode section
  std::string language;  // the splitter's
};

// A resolved request: ServeJob's functions run on these options, which the document formats'
// translate functions hold by reference (hence one allocation for both).
struct ModelJob : ServeJob {
  TranslateOptions options;
  StreamOptions stream;
  LineTerms terms;  // per text of the request ("constraints", "avoid")
};

// Errors of translate's code name its flags; a request names its fields.
std::string as_fields(std::string message) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"--length-penalty", "length_penalty"}, {"--temperature", "sampling.temperature"},
      {"--top-k", "sampling.top_k"},           {"--top-p", "sampling.top_p"},
      {"--seed", "sampling.seed"},             {"--beam", "beam"},
      {"--sampling", "sampling"},              {"--constraints", "constraints"},
      {"--avoid", "avoid"},                    {"--alignment", "alignment"},
      {"--format", "format"}};
  for (const auto& [flag, field] : kNames)
    for (size_t at; (at = message.find(flag)) != std::string::npos;)
      message.replace(at, std::strlen(flag), field);
  return message;
}

// The request's flags: the server's, with the request's options over them.
DecodeFlags request_flags(const DecodeFlags& base, const TranslateRequest& r) {
  DecodeFlags flags = base;
  if (r.beam) flags.beam = *r.beam;
  if (r.length_penalty) flags.length_penalty = *r.length_penalty;
  if (r.sampling) {
    flags.sampling.enabled = true;
    if (r.temperature) flags.sampling.temperature = *r.temperature;
    if (r.top_p) flags.sampling.top_p = *r.top_p;
    if (r.top_k) flags.sampling.top_k = *r.top_k;
    if (r.seed) flags.sampling.seed = static_cast<uint64_t>(*r.seed);
  }
  return flags;
}

bool has_terms(const std::vector<std::vector<std::string>>& per_text) {
  for (const auto& t : per_text)
    if (!t.empty()) return true;
  return false;
}

// Requests with equal keys share batches: the options that change a translation.
std::string shared_key(const TranslateRequest& r, const TranslateOptions& o) {
  std::ostringstream key;
  key.precision(17);
  key << r.format << ' ' << static_cast<int>(o.search.mode) << ' ' << o.search.beam_size << ' '
      << o.search.length_penalty << ' ' << o.search.nbest << ' ' << static_cast<int>(o.alignment);
  return key.str();
}

std::shared_ptr<const ServeJob> resolve_job(const ModelEntry& m, const ServeArgs& args,
                                            const TranslateRequest& r) {
  const DecodeFlags flags = request_flags(args.decode, r);
  auto job = std::make_shared<ModelJob>();
  const bool terms = has_terms(r.constraints) || has_terms(r.avoid);
  DocumentOptions document;
  document.format = parse_choice<InputFormat>(r.format, "--format");
  document.language = m.language;
  document.html_lenient = args.html_lenient && document.format == InputFormat::kHtml;
  if (terms && document.format != InputFormat::kLines)
    throw HttpError(400, "\"constraints\" and \"avoid\" need \"format\": \"lines\"");
  job->options = decode_options(flags, [&] { return m.decode; }).translate;
  auto& options = job->options;
  if (has_terms(r.constraints))
    options.search.mode = resolve_search_mode(options.search, /*constraints=*/true);
  options.tag_id = m.models.translate.tag_id;
  if (!r.alignment.empty())
    options.alignment = parse_choice<AlignmentMode>(r.alignment, "--alignment");
  job->terms.constraints = r.constraints;
  job->terms.avoid = r.avoid;
  Scorer& scorer = *m.models.scorer;
  const Vocabs& vocabs = m.models.first().vocabs;
  use_document_format(job->stream, scorer, vocabs, options, document);
  job->output.document = document.format != InputFormat::kLines;
  job->output.scores = r.scores;
  job->alignment = options.alignment;
  const bool own = terms || r.sampling || document.format == InputFormat::kHtml;
  job->key = own ? "" : shared_key(r, options);
  job->tokens = [&vocabs](const std::string& unit) {
    return static_cast<int64_t>(vocabs.src.encode(unit).size()) + 1;
  };
  ModelJob* self = job.get();  // the job owns the function: no cycle
  job->translate = [self, &scorer, &vocabs](const std::vector<std::string>& units,
                                            int64_t first) {
    TranslateStats stats;
    const auto slice = [&](const std::vector<std::vector<std::string>>& all) {
      if (all.empty()) return all;
      return std::vector<std::vector<std::string>>(all.begin() + first,
                                                   all.begin() + first + units.size());
    };
    const LineTerms terms{slice(self->terms.constraints), slice(self->terms.avoid), nullptr};
    if (!self->stream.format.translate)
      return translate_lines(scorer, vocabs, units, self->options, &stats, terms, {}, first);
    try {
      return self->stream.format.translate(units, terms, {}, first, &stats);
    } catch (const Error& e) {  // malformed markup: the request's own batch
      throw HttpError(400, e.what());
    }
  };
  return job;
}

std::pair<std::string, std::string> name_and_dir(const std::string& arg, size_t count) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos) {
    if (count > 1) throw Error("--checkpoint " + arg + ": give NAME=DIR when serving several");
    return {"default", arg};
  }
  const std::string name = arg.substr(0, eq);
  if (name.empty() || name.find_first_of(" \t\n\"\\/") != std::string::npos)
    throw Error("--checkpoint " + arg + ": a model name is a word (e.g. en-de)");
  return {name, arg.substr(eq + 1)};
}

std::string read_api_key(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read --api-key-file " + path);
  std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  if (key.empty()) throw Error("--api-key-file " + path + " is empty");
  return key;
}

// Loads every model; fills the served models' list with their resolvers.
std::vector<std::unique_ptr<ModelEntry>> load_models(const ServeArgs& args,
                                                     std::vector<ServedModel>& served) {
  std::vector<std::unique_ptr<ModelEntry>> entries;
  for (const auto& arg : args.checkpoints) {
    const auto [name, dir] = name_and_dir(arg, args.checkpoints.size());
    for (const auto& e : entries)
      if (e->name == name) throw Error("--checkpoint: two models named " + name);
    const DecodeRequest request = decode_request(args.decode, {dir});
    if (entries.empty()) use_inference_threads(request.options);
    auto e = std::make_unique<ModelEntry>();
    e->name = name;
    e->models = load_for_decoding(request.checkpoints, request.options);
    e->decode = e->models.first().config.decode;
    e->language = splitter_language(args.source_lang, e->models.first().config);
    spdlog::info("model {}: {}", name, e->models.first().dir);
    const ModelEntry* m = e.get();
    ServedModel s;
    s.name = name;
    s.info = nlohmann::json{{"name", name},
                            {"source_language", e->language},
                            {"beam", request.options.translate.search.beam_size},
                            {"length_penalty", request.options.translate.search.length_penalty}}
                 .dump();
    s.resolve = [m, &args](const TranslateRequest& r) {
      try {
        return resolve_job(*m, args, r);
      } catch (const HttpError&) {
        throw;
      } catch (const std::exception& e) {
        throw HttpError(400, as_fields(e.what()));
      }
    };
    served.push_back(std::move(s));
    entries.push_back(std::move(e));
  }
  return entries;
}

// Waits for SIGTERM or SIGINT, then drains the server; a second signal, or a drain longer than
// the timeout, ends the process at once.
void watch_signals(Server& server, StopSignals& signals, const std::atomic<bool>& done,
                   double drain_timeout) {
  using namespace std::chrono;
  const auto tick = milliseconds(20);
  while (!done && signals.requested() == 0) std::this_thread::sleep_for(tick);
  if (done) return;
  const int sig = signals.take();
  spdlog::info("signal {}: no new connections; answering the accepted requests (at most {} s)",
               sig, drain_timeout);
  server.stop();
  const auto deadline = steady_clock::now() + duration<double>(drain_timeout);
  while (!done) {
    if (const int again = signals.take()) {
      spdlog::warn("signal {} again: exiting now", again);
      std::fflush(nullptr);
      std::_Exit(128 + again);
    }
    if (steady_clock::now() > deadline) {
      spdlog::error("--drain-timeout of {} s passed with requests unanswered", drain_timeout);
      std::fflush(nullptr);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(tick);
  }
}

void run_serve(ServeArgs& args) {
  if (args.max_delay_ms < 0) throw Error("--max-delay-ms must be >= 0");
  if (args.drain_timeout <= 0) throw Error("--drain-timeout must be > 0");
  std::signal(SIGPIPE, SIG_IGN);  // a client that hung up is a failed write, not an exit
  if (!args.api_key_file.empty()) args.serve.api_key = read_api_key(args.api_key_file);
  args.serve.batcher.max_delay = std::chrono::milliseconds(args.max_delay_ms);
  args.serve.deadline = std::chrono::milliseconds(args.deadline_ms);
  StopSignals signals(StopSignals::SecondSigint::kCounted);
  std::vector<ServedModel> served;
  const auto entries = load_models(args, served);
  Server server(args.serve, std::move(served));
  const int port = server.bind();
  spdlog::info("serving on http://{}:{} ({} connections at once{})", args.serve.host, port,
               args.serve.http_threads, args.serve.api_key.empty() ? "" : ", API key required");
  std::atomic<bool> done{false};
  std::thread watcher([&] { watch_signals(server, signals, done, args.drain_timeout); });
  server.listen();
  done = true;
  watcher.join();
  spdlog::info("stopped: every accepted request was answered");
}

void add_limit_flags(CLI::App* cmd, ServeArgs& a) {
  auto& s = a.serve;
  cmd->add_option("--http-threads", s.http_threads,
                  "Connections served at once; a keep-alive connection holds one (default: 64)");
  cmd->add_option("--max-pending", s.max_pending,
                  "Connections waiting for one of those; more are answered 429 (default: 256)");
  cmd->add_option("--max-payload-bytes", s.max_payload_bytes,
                  "Largest request body; larger is answered 413 (default: 10485760)");
  cmd->add_option("--max-texts", s.request.max_texts,
                  "Most strings in one request's \"text\"; more is answered 413 (default: 1000)");
  cmd->add_option("--max-text-chars", s.request.max_text_chars,
                  "Most characters in one string; more is answered 413 (default: 10000)");
  cmd->add_option("--max-queue", s.batcher.max_queue,
                  "Most texts waiting to be translated; a request that would pass it is answered "
                  "429 (default: 10000)");
  cmd->add_option("--deadline-ms", a.deadline_ms,
                  "A request not answered by then gets 504 with the texts done so far "
                  "(default: 60000)");
  cmd->add_option("--keep-alive-s", s.keep_alive_seconds,
                  "An idle keep-alive connection is closed after this (default: 5)");
  cmd->add_option("--io-timeout-s", s.io_timeout_seconds,
                  "Longest wait while reading a request or writing an answer (default: 10)");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  args->serve.batcher.batch_tokens = 16000;
  auto* cmd = app.add_subcommand("serve", "Translate over HTTP: POST /translate, batched");
  cmd->add_option("--checkpoint", args->checkpoints,
                  "A checkpoint or run directory to serve; NAME=DIR names it (a request's "
                  "\"model\"), repeat it for several models")
      ->required()
      ->take_all();
  cmd->add_option("--host", args->serve.host,
                  "Address to listen on (default: 127.0.0.1, this machine only)");
  cmd->add_option("--port", args->serve.port, "Port to listen on; 0: any free one (default: 8080)");
  add_search_flags(cmd, args->decode);
  cmd->add_option("--chunk-tokens", args->serve.batcher.batch_tokens,
                  "Source tokens the batcher hands to one search, which batches them by "
                  "--batch-tokens as translate does a chunk (default: 16000)");
  cmd->add_option("--max-delay-ms", args->max_delay_ms,
                  "Longest wait for a fuller batch while other requests are about (default: 5)");
  add_limit_flags(cmd, *args);
  cmd->add_option("--api-key-file", args->api_key_file,
                  "A file holding a key: every request but GET /health must send "
                  "\"Authorization: Bearer KEY\" (401 otherwise)");
  cmd->add_flag("--log-requests", args->serve.log_requests,
                "Log every request's body and answer (off: nothing of what clients send)");
  cmd->add_option("--source-lang", args->source_lang,
                  "Non-breaking prefixes for \"format\": \"text\" and \"html\" (default: the "
                  "training source file's extension, else en)");
  cmd->add_flag("--html-lenient", args->html_lenient,
                "For \"format\": \"html\": copy markup that cannot be matched as text");
  cmd->add_option("--drain-timeout", args->drain_timeout,
                  "Seconds to answer the accepted requests after SIGTERM/SIGINT (default: 30)");
  cmd->callback([args] {
    setup_logging();
    run_serve(*args);
  });
}

}  // namespace nmt
