// nmt serve's HTTP front on loopback, with a fake model (upper-cases its texts), so these tests
// check the server itself: routes, limits, errors, the API key, overflow, deadlines, the drain,
// and a 100,000-request load with faults. The real model's answers are compared with nmt
// translate in test_decode_e2e.cpp (QuickstartRun.Serve*).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "quickstart_run.h"
#include "serve/metrics.h"
#include "serve/server.h"
#include "util/util.h"

using namespace nmt;
using nlohmann::json;

namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Runs before each batch of the fake model (a sleep, a wait), when set.
struct Hook {
  std::function<void()> before_batch;
  std::atomic<int> batches{0};
};

ServedModel fake_model(const std::string& name, std::shared_ptr<Hook> hook) {
  ServedModel m;
  m.name = name;
  m.info = json{{"name", name}}.dump();
  m.resolve = [hook](const TranslateRequest& r) {
    if (r.beam && *r.beam > 8) throw HttpError(400, "\"beam\": at most 8 here");
    auto job = std::make_shared<ServeJob>();
    job->key = "same";
    job->tokens = [](const std::string& u) { return static_cast<int64_t>(u.size()) + 1; };
    job->output.scores = r.scores;
    job->translate = [hook](const std::vector<std::string>& units, int64_t) {
      ++hook->batches;
      if (hook->before_batch) hook->before_batch();
      std::vector<Translation> out(units.size());
      for (size_t i = 0; i < units.size(); ++i) {
        out[i].texts = {upper(units[i])};
        out[i].scores = {-static_cast<double>(units[i].size())};
        out[i].done = true;
      }
      return out;
    };
    return std::shared_ptr<const ServeJob>(job);
  };
  return m;
}

ServeOptions test_options() {
  ServeOptions o;
  o.port = 0;
  o.http_threads = 16;
  o.batcher.max_delay = std::chrono::milliseconds(1);
  return o;
}

class RunningServer {
 public:
  RunningServer(ServeOptions options, std::vector<ServedModel> models)
      : server_(std::move(options), std::move(models)) {
    port_ = server_.bind();
    thread_ = std::thread([this] { server_.listen(); });
  }
  ~RunningServer() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  Server& server() { return server_; }

 private:
  Server server_;
  int port_ = 0;
  std::thread thread_;
};

httplib::Result post(httplib::Client& c, const std::string& body) {
  return c.Post("/translate", body, "application/json");
}

// A connection that sends the start of a request and hangs up.
void cut_off_request(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string part =
        "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{\"text\": [\"a";
    (void)!::write(fd, part.data(), part.size());
  }
  ::close(fd);
}

int64_t rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return 0;
}

}  // namespace

TEST(ServeHttp, AnswersTheRoutes) {
  auto hook = std::make_shared<Hook>();
  RunningServer s(test_options(), {fake_model("en-de", hook)});
  httplib::Client c("127.0.0.1", s.port());
  auto r = post(c, R"({"text": ["a b", "c"], "scores": true})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body),
            json::parse(R"({"translations": ["A B", "C"], "scores": [-3.0, -1.0]})"));
  r = post(c, R"({"text": "one", "model": "en-de"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "{\"translations\":[\"ONE\"]}\n");
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/health", "{\"status\":\"ok\"}\n"},
           {"/ready", "{\"status\":\"ready\"}\n"},
           {"/models", "{\"models\":[{\"name\":\"en-de\"}]}\n"}}) {
    r = c.Get(path.c_str());
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->body, body) << path;
  }
  r = c.Get("/metrics");
  ASSERT_TRUE(r);
  // Every answer counts: 2 translations and 3 GETs before this one.
  EXPECT_NE(r->body.find("nmt_requests_total{status=\"200\"} 5\n"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("nmt_sentences_total 3\n"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("nmt_request_seconds_count 2\n"), std::string::npos) << r->body;
}

TEST(ServeHttp, EveryLimitAndErrorHasItsStatusAndJsonBody) {
  auto hook = std::make_shared<Hook>();
  ServeOptions o = test_options();
  o.max_payload_bytes = 2000;
  o.request.max_texts = 3;
  o.request.max_text_chars = 10;
  RunningServer s(o, {fake_model("a", hook), fake_model("b", hook)});
  httplib::Client c("127.0.0.1", s.port());
  const std::vector<std::tuple<std::string, int, std::string>> cases = {
      {R"({"text": ["x"], "model": "a"})", 200, "X"},
      {R"({"text": ["x"]})", 400, "\"model\": required when several models are served (a, b)"},
      {R"({"text": ["x"], "model": "c"})", 404, "unknown model \"c\""},
      {R"({"text": [1], "model": "a"})", 400, "\"text[0]\": must be a string"},
      {R"({"text": "x", "model": "a", "bem": 2})", 400, "\"bem\": unknown field"},
      {R"({"text": "x", "model": "a", "beam": 9})", 400, "\"beam\": at most 8 here"},
      {R"({"text": "x", "model": "a", "beam": "5"})", 400, "\"beam\": must be an integer"},
      {R"({"text": ["x", "y", "z", "w"], "model": "a"})", 413, "4 strings, at most 3"},
      {R"({"text": "01234567890", "model": "a"})", 413, "11 characters, at most 10"},
      {R"({"text": ["x")", 400, "malformed JSON"},
      {"{\"text\": \"" + std::string(3000, 'x') + "\"}", 413, "at most 2000 bytes"},
  };
  for (const auto& [body, status, what] : cases) {
    httplib::Client fresh("127.0.0.1", s.port());  // a 413 closes its connection
    const auto r = post(fresh, body);
    ASSERT_TRUE(r) << body.substr(0, 80);
    EXPECT_EQ(r->status, status) << body.substr(0, 80) << " -> " << r->body;
    const auto error = json::parse(r->body).value("error", std::string());
    EXPECT_NE((status == 200 ? r->body : error).find(what), std::string::npos) << r->body;
  }
  const auto r = c.Get("/nowhere");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(r->body.find("POST /translate"), std::string::npos) << r->body;
}

TEST(ServeHttp, AnApiKeyGuardsAllButHealth) {
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", "secreT"));
  EXPECT_FALSE(constant_time_equal("secret", "secret2"));
  EXPECT_FALSE(constant_time_equal("", "x"));
  auto hook = std::make_shared<Hook>();
  ServeOptions o = test_options();
  o.api_key = "k3y";
  RunningServer s(o, {fake_model("m", hook)});
  httplib::Client none("127.0.0.1", s.port()), wrong("127.0.0.1", s.port()),
      right("127.0.0.1", s.port());
  wrong.set_bearer_token_auth("k3");
  right.set_bearer_token_auth("k3y");
  for (auto* c : {&none, &wrong}) {
    for (const auto& r : {post(*c, R"({"text": "a"})"), c->Get("/metrics"), c->Get("/ready")}) {
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 401) << r->body;
      EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer");
    }
    const auto health = c->Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
  }
  const auto r = post(right, R"({"text": "a"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(hook->batches.load(), 1);  // the refused requests never reached the model
}

namespace {

// Holds the fake model's batches until released.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> waiting{0};
  void wait() {
    ++waiting;
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [this] { return open; });
  }
  void release() {
    const std::lock_guard<std::mutex> lock(m);
    open = true;
    cv.notify_all();
  }
};

bool eventually(const std::function<bool()>& f) {
  for (int i = 0; i < 500; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST(ServeHttp, AFullQueueIsAnswered429) {
  auto hook = std::make_shared<Hook>();
  Gate gate;
  hook->before_batch = [&gate] { gate.wait(); };
  ServeOptions o = test_options();
  o.batcher.max_queue = 2;
  RunningServer s(o, {fake_model("m", hook)});
  std::thread first([&] {  // taken by the worker, which the gate holds
    httplib::Client c("127.0.0.1", s.port());
    EXPECT_EQ(post(c, R"({"text": "a"})")->status, 200);
  });
  ASSERT_TRUE(eventually([&] { return gate.waiting.load() == 1; }));
  std::thread second([&] {  // two texts: the queue is full
    httplib::Client c("127.0.0.1", s.port());
    EXPECT_EQ(post(c, R"({"text": ["b", "c"]})")->status, 200);
  });
  httplib::Client c("127.0.0.1", s.port());
  ASSERT_TRUE(eventually([&] {
    return c.Get("/metrics")->body.find("nmt_queue_length 2\n") != std::string::npos;
  }));
  const auto r = post(c, R"({"text": "d"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_NE(r->body.find("overloaded"), std::string::npos) << r->body;
  gate.release();
  first.join();
  second.join();
}

TEST(ServeHttp, ConnectionsBeyondThePendingLimitAreAnswered429) {
  auto hook = std::make_shared<Hook>();
  Gate gate;
  hook->before_batch = [&gate] { gate.wait(); };
  ServeOptions o = test_options();
  o.http_threads = 1;
  o.max_pending = 1;
  o.keep_alive_seconds = 1;
  RunningServer s(o, {fake_model("m", hook)});
  std::thread held([&] {  // holds the one connection thread
    httplib::Client c("127.0.0.1", s.port());
    EXPECT_EQ(post(c, R"({"text": "a"})")->status, 200);
  });
  ASSERT_TRUE(eventually([&] { return gate.waiting.load() == 1; }));
  std::thread pending([&] {  // waits for the thread, then is served
    httplib::Client c("127.0.0.1", s.port());
    const auto r = post(c, R"({"text": "b"})");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "{\"translations\":[\"B\"]}\n");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  httplib::Client c("127.0.0.1", s.port());
  const auto r = post(c, R"({"text": "c"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_NE(r->body.find("connections are waiting"), std::string::npos) << r->body;
  gate.release();
  held.join();
  pending.join();
}

TEST(ServeHttp, ADeadlinePassedGives504WithTheTextsDone) {
  auto hook = std::make_shared<Hook>();
  hook->before_batch = [] { std::this_thread::sleep_for(std::chrono::milliseconds(400)); };
  ServeOptions o = test_options();
  o.batcher.batch_tokens = 1;  // a batch per text
  o.deadline = std::chrono::milliseconds(600);
  RunningServer s(o, {fake_model("m", hook)});
  httplib::Client c("127.0.0.1", s.port());
  const auto r = post(c, R"({"text": ["a", "b", "c"]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504);
  const auto body = json::parse(r->body);
  EXPECT_EQ(body["translations"][0], "A") << r->body;
  EXPECT_TRUE(body["translations"][2].is_null()) << r->body;
  EXPECT_NE(body["error"].get<std::string>().find("deadline of 600 ms passed"), std::string::npos);
  // The withdrawn text "c" is never translated: at most the running "b" batch follows.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_LE(hook->batches.load(), 2);
}

TEST(ServeHttp, StopAnswersTheRequestsItHasThenRefusesConnections) {
  auto hook = std::make_shared<Hook>();
  Gate gate;
  hook->before_batch = [&gate] { gate.wait(); };
  RunningServer s(test_options(), {fake_model("m", hook)});
  std::thread client([&] {
    httplib::Client c("127.0.0.1", s.port());
    const auto r = post(c, R"({"text": ["in", "flight"]})");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "{\"translations\":[\"IN\",\"FLIGHT\"]}\n");
    EXPECT_EQ(r->get_header_value("Connection"), "close");
  });
  ASSERT_TRUE(eventually([&] { return gate.waiting.load() == 1; }));
  std::thread stopper([&] { s.stop(); });  // returns when the request above is answered
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  httplib::Client late("127.0.0.1", s.port());
  late.set_connection_timeout(1);
  EXPECT_FALSE(late.Get("/health"));  // the listener is closed
  gate.release();
  client.join();
  stopper.join();
}

// 100,000 requests from 8 clients, 5 % of them bad (malformed, oversized, unauthorized, cut
// off): every good one answered right, every bad one a 4xx, memory flat.
TEST(ServeHttp, HoldsUpUnderLoadWithFaults) {
  auto hook = std::make_shared<Hook>();
  ServeOptions o = test_options();
  o.api_key = "key";
  o.max_payload_bytes = 4096;
  RunningServer s(o, {fake_model("m", hook)});
  constexpr int kClients = 8, kPerClient = 12500;
  std::atomic<int64_t> done{0}, wrong{0}, bad{0}, bad_answered{0}, rss_at_10k{0};
  auto client = [&](int id) {
    httplib::Client c("127.0.0.1", s.port()), anonymous("127.0.0.1", s.port());
    c.set_bearer_token_auth("key");
    for (int i = 0; i < kPerClient; ++i) {
      const std::string word = "w" + std::to_string(id) + "x" + std::to_string(i);
      httplib::Result r{nullptr, httplib::Error::Unknown};
      switch (i % 20 == 0 ? i / 20 % 4 : 4) {
        case 0: r = post(c, "{\"text\": [\"" + word); break;
        case 1: r = post(c, "{\"text\": \"" + std::string(5000, 'x') + "\"}"); break;
        case 2: r = post(anonymous, "{\"text\": \"" + word + "\"}"); break;
        case 3: cut_off_request(s.port()); break;
        default:
          r = post(c, "{\"text\": \"" + word + "\"}");
          if (!r || r->status != 200 || r->body != "{\"translations\":[\"" + upper(word) + "\"]}\n")
            ++wrong;
      }
      if (i % 20 == 0 && i / 20 % 4 != 3) {
        ++bad;
        if (r && r->status >= 400 && r->status < 500) ++bad_answered;
      }
      if (++done == 10000) rss_at_10k = rss_kib();
    }
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < kClients; ++id) threads.emplace_back(client, id);
  for (auto& t : threads) t.join();
  const int64_t rss_end = rss_kib();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(bad_answered.load(), bad.load());
  EXPECT_LE(rss_end, rss_at_10k.load() * 11 / 10) << "RSS after 10,000 requests "
                                                   << rss_at_10k.load() << " KiB";
  httplib::Client c("127.0.0.1", s.port());
  c.set_bearer_token_auth("key");
  EXPECT_EQ(c.Get("/health")->status, 200);  // still up
  std::printf("load: %lld requests, RSS %lld KiB after 10,000, %lld KiB at the end\n",
              static_cast<long long>(done.load()), static_cast<long long>(rss_at_10k.load()),
              static_cast<long long>(rss_end));
}

// ---- nmt serve itself, with the quickstart model: its answers are nmt translate's ----

namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// `nmt serve` on the quickstart run, ready; killed when the test ends unless waited for.
class ServeProcess {
 public:
  ServeProcess(const std::string& run, const std::string& log, const std::string& flags = "")
      : port_(free_port()) {
    pid_ = nmt_test::spawn(nmt_test::nmt_bin() + " serve --checkpoint " + run +
                           " --threads 1 --port " + std::to_string(port_) + " " + flags + " >" +
                           log + " 2>&1");
    httplib::Client c("127.0.0.1", port_);
    ready_ = nmt_test::wait_for(
        [&] {
          const auto r = c.Get("/ready");
          return r && r->status == 200;
        },
        120);
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool ready() const { return ready_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // The exit status after `sig` (-1: killed by a signal, or not within 60 s).
  int stop(int sig) {
    ::kill(pid_, sig);
    int status = 0;
    for (int i = 0; i < 600; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }

 private:
  int port_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

std::vector<std::string> first_lines(const std::string& path, size_t n) {
  auto lines = nmt_test::read_lines_of(path);
  lines.resize(std::min(n, lines.size()));
  return lines;
}

std::string format6(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", x);
  return buf;
}

}  // namespace

namespace nmt_test {

// One request with every line, and the lines one per request from 8 clients at once: the
// translations (with scores and alignments for the first) are nmt translate's, byte for byte.
TEST_F(QuickstartRun, ServeAnswersAsTranslateDoes) {
  const auto lines = first_lines(data() + "/test.en", 40);
  std::string input;
  for (const auto& l : lines) input += l + "\n";
  write_text(path("in.en"), input);
  ServeProcess server(run(), path("serve.log"));
  ASSERT_TRUE(server.ready()) << read_text(path("serve.log"));
  httplib::Client c("127.0.0.1", server.port());
  for (const std::string beam : {"1", "4"}) {
    const auto t = run_command(translate("--beam " + beam + " --scores --alignment --input " +
                                         path("in.en") + " --output " + path("out." + beam)));
    ASSERT_EQ(t.status, 0) << t.output;
    const auto expected = read_lines_of(path("out." + beam));
    const json request = {{"text", lines}, {"beam", std::stoi(beam)}, {"scores", true},
                          {"alignment", "hard"}};
    const auto r = post(c, request.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const auto body = json::parse(r->body);
    ASSERT_EQ(body["translations"].size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_EQ(body["translations"][i].get<std::string>() + " ||| " +
                    body["alignments"][i].get<std::string>() + "\t" +
                    format6(body["scores"][i].get<double>()),
                expected[i])
          << "beam " << beam << ", line " << i;
  }
  // Concurrent one-line requests share batches: the texts stay translate's.
  const auto t = run_command(translate("--input " + path("in.en") + " --output " + path("out")));
  ASSERT_EQ(t.status, 0) << t.output;
  const auto expected = read_lines_of(path("out"));
  std::vector<std::string> got(lines.size());
  std::vector<std::thread> clients;
  for (size_t k = 0; k < 8; ++k)
    clients.emplace_back([&, k] {
      httplib::Client own("127.0.0.1", server.port());
      for (size_t i = k; i < lines.size(); i += 8) {
        const auto r = post(own, json{{"text", lines[i]}}.dump());
        if (r && r->status == 200) got[i] = json::parse(r->body)["translations"][0];
      }
    });
  for (auto& th : clients) th.join();
  EXPECT_EQ(got, expected);
}

TEST_F(QuickstartRun, ServeTranslatesDocumentsAsTranslateDoes) {
  const auto lines = first_lines(data() + "/test.en", 30);
  std::vector<std::string> paragraphs;
  for (size_t i = 0; i + 2 < lines.size(); i += 3)
    paragraphs.push_back(lines[i] + ". " + lines[i + 1] + "!  " + lines[i + 2] + ".");
  paragraphs.push_back("");
  std::string input;
  for (const auto& p : paragraphs) input += p + "\n";
  write_text(path("in.txt"), input);
  const auto t = run_command(translate("--format text --scores --input " + path("in.txt") +
                                       " --output " + path("out.txt")));
  ASSERT_EQ(t.status, 0) << t.output;
  const auto expected = read_lines_of(path("out.txt"));
  ServeProcess server(run(), path("serve.log"));
  ASSERT_TRUE(server.ready()) << read_text(path("serve.log"));
  httplib::Client c("127.0.0.1", server.port());
  const auto r =
      post(c, json{{"text", paragraphs}, {"format", "text"}, {"scores", true}}.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto body = json::parse(r->body);
  ASSERT_EQ(body["translations"].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string line = body["translations"][i];
    std::string scores;
    for (const auto& s : body["scores"][i]) scores += (scores.empty() ? "" : " ") + format6(s);
    if (!scores.empty()) line += "\t" + scores;
    EXPECT_EQ(line, expected[i]) << "paragraph " << i;
  }
}

// SIGTERM under a 32-client load: every answer that comes is complete and right, the server
// exits 0; requests after the stop find the port closed, not a half answer.
TEST_F(QuickstartRun, ServeDrainsOnSigterm) {
  const auto lines = first_lines(data() + "/test.en", 64);
  ServeProcess server(run(), path("serve.log"), "--drain-timeout 60");
  ASSERT_TRUE(server.ready()) << read_text(path("serve.log"));
  std::atomic<bool> stopping{false};
  std::atomic<int> answered{0}, answered_after_signal{0}, bad{0};
  std::vector<std::thread> clients;
  for (int k = 0; k < 32; ++k)
    clients.emplace_back([&, k] {
      httplib::Client c("127.0.0.1", server.port());
      c.set_read_timeout(60);
      for (size_t i = static_cast<size_t>(k);; i = (i + 32) % lines.size()) {
        const bool after = stopping;
        const auto r = post(c, json{{"text", lines[i]}}.dump());
        if (!r) {
          if (stopping) return;  // refused or closed: not accepted
          continue;
        }
        if (r->status != 200 || json::parse(r->body)["translations"].size() != 1) ++bad;
        ++answered;
        if (after) ++answered_after_signal;
      }
    });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  stopping = true;
  const int status = server.stop(SIGTERM);
  for (auto& th : clients) th.join();
  EXPECT_EQ(status, 0) << read_text(path("serve.log"));
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(answered.load(), 32);
  const std::string log = read_text(path("serve.log"));
  EXPECT_NE(log.find("every accepted request was answered"), std::string::npos) << log;
  std::printf("drain: %d answers, %d of them sent after SIGTERM\n", answered.load(),
              answered_after_signal.load());
}

}  // namespace nmt_test
