// nmt serve's pieces without HTTP: the metrics' text and the batcher's rules.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "serve/batcher.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "util/util.h"

using namespace nmt;

TEST(ServeMetrics, HistogramIsCumulativeInPrometheusText) {
  Histogram h({1, 2.5});
  for (const double v : {0.5, 1.0, 2.0, 7.0}) h.observe(v);
  EXPECT_EQ(h.text("x", "an x"),
            "# HELP x an x\n# TYPE x histogram\n"
            "x_bucket{le=\"1\"} 2\nx_bucket{le=\"2.5\"} 3\nx_bucket{le=\"+Inf\"} 4\n"
            "x_sum 10.5\nx_count 4\n");
  ServeMetrics m;
  m.count_request(200);
  m.count_request(200);
  m.count_request(429);
  m.add_translated(3, 40);
  m.set_queue_length(5);
  const std::string t = m.text();
  EXPECT_NE(t.find("nmt_requests_total{status=\"200\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("nmt_requests_total{status=\"429\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("nmt_queue_length 5\n"), std::string::npos) << t;
  EXPECT_NE(t.find("nmt_sentences_total 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("nmt_tokens_total 40\n"), std::string::npos) << t;
}

namespace {

// A translation that records its batches and can hold the worker until released.
struct Recorder {
  std::mutex mutex;
  std::condition_variable cv;
  bool hold = false;
  bool holding = false;
  std::vector<std::vector<std::string>> batches;

  Batcher::Translate function() {
    return [this](const std::string& key, const std::vector<std::string>& units) {
      std::unique_lock<std::mutex> lock(mutex);
      holding = true;
      cv.notify_all();
      cv.wait(lock, [this] { return !hold; });
      holding = false;
      batches.push_back(units);
      std::vector<Translation> out(units.size());
      for (size_t i = 0; i < units.size(); ++i) out[i].texts = {key + ":" + units[i]};
      return out;
    };
  }
  void wait_holding() {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [this] { return holding; });
  }
  void release() {
    const std::lock_guard<std::mutex> lock(mutex);
    hold = false;
    cv.notify_all();
  }
};

std::vector<std::string> texts_of(const std::vector<Translation>& ts) {
  std::vector<std::string> out;
  for (const auto& t : ts) out.push_back(t.texts.at(0));
  return out;
}

}  // namespace

// A long request and a short one queued together: the short one's unit rides in the first
// batch, taken in turn with the long one's; every unit comes back to its request in order.
TEST(Batcher, UnitsAreTakenFromRequestsInTurn) {
  Recorder rec;
  rec.hold = true;
  Batcher::Limits limits;
  limits.batch_tokens = 30;
  limits.max_delay = std::chrono::milliseconds(1);
  Batcher b(limits, rec.function());
  auto first = b.submit("k", {"a0"}, {10});
  rec.wait_holding();  // the lone request went at once; the worker is busy with it
  std::vector<std::string> longer;
  for (int i = 0; i < 10; ++i) longer.push_back("l" + std::to_string(i));
  auto long_one = b.submit("k", longer, std::vector<int64_t>(10, 10));
  auto short_one = b.submit("k", {"s0"}, {10});
  EXPECT_EQ(b.queued(), 11);
  rec.release();
  EXPECT_EQ(texts_of(first.get()), (std::vector<std::string>{"k:a0"}));
  EXPECT_EQ(texts_of(short_one.get()), (std::vector<std::string>{"k:s0"}));
  const auto l = texts_of(long_one.get());
  ASSERT_EQ(l.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(l[static_cast<size_t>(i)], "k:l" + std::to_string(i));
  ASSERT_GE(rec.batches.size(), 2u);
  EXPECT_EQ(rec.batches[0], (std::vector<std::string>{"a0"}));
  EXPECT_EQ(rec.batches[1], (std::vector<std::string>{"l0", "s0", "l1"}));
  EXPECT_TRUE(b.drain(std::chrono::milliseconds(1000)));
  EXPECT_EQ(b.queued(), 0);
}

// Units of other options never share a batch.
TEST(Batcher, KeysDoNotMix) {
  Recorder rec;
  rec.hold = true;
  Batcher b({}, rec.function());
  auto a = b.submit("a", {"x"}, {1});
  rec.wait_holding();
  auto c = b.submit("b", {"y"}, {1});
  auto d = b.submit("a", {"z"}, {1});
  rec.release();
  EXPECT_EQ(texts_of(c.get()), (std::vector<std::string>{"b:y"}));
  EXPECT_EQ(texts_of(d.get()), (std::vector<std::string>{"a:z"}));
  a.get();
  for (const auto& batch : rec.batches) EXPECT_EQ(batch.size(), 1u);
}

// A full queue refuses (Overloaded), a stopped batcher too (Stopping), and what was queued
// before the stop is still translated; an error reaches the request's future.
TEST(Batcher, LimitsStopAndErrors) {
  Recorder rec;
  rec.hold = true;
  Batcher::Limits limits;
  limits.max_queue = 2;
  Batcher b(limits, rec.function());
  auto first = b.submit("k", {"a"}, {1});
  rec.wait_holding();
  auto second = b.submit("k", {"b", "c"}, {1, 1});
  EXPECT_THROW(b.submit("k", {"d"}, {1}), Overloaded);
  b.stop();
  EXPECT_THROW(b.submit("k", {"e"}, {1}), Stopping);
  rec.release();
  EXPECT_EQ(texts_of(second.get()), (std::vector<std::string>{"k:b", "k:c"}));
  EXPECT_TRUE(b.drain(std::chrono::milliseconds(1000)));
  EXPECT_TRUE(b.submit("k", {}, {}).get().empty());

  Batcher failing({}, [](const std::string&, const std::vector<std::string>&) -> std::vector<Translation> {
    throw Error("model failed");
  });
  auto f = failing.submit("k", {"x", "y"}, {1, 1});
  EXPECT_THROW(f.get(), Error);
  EXPECT_THROW(failing.submit("k", {"x"}, {1, 2}), Error);
}

// A request withdrawn (its deadline passed) gives the units finished so far and leaves the
// queue; the others' requests go on.
TEST(Batcher, WithdrawGivesWhatIsDoneAndLeavesTheQueue) {
  Recorder rec;
  rec.hold = true;
  Batcher::Limits limits;
  limits.batch_tokens = 1;  // a batch per unit
  Batcher b(limits, rec.function());
  Batcher::Ticket ticket;
  auto withdrawn = b.submit("k", {"a", "b", "c"}, {1, 1, 1}, &ticket);
  rec.wait_holding();  // "a" is in the worker
  auto other = b.submit("k", {"x"}, {1});
  EXPECT_EQ(b.queued(), 3);
  auto done = b.withdraw(ticket);  // nothing finished yet
  EXPECT_EQ(done.size(), 3u);
  EXPECT_FALSE(done[0] || done[1] || done[2]);
  EXPECT_EQ(b.queued(), 1);  // "b" and "c" left
  rec.release();
  EXPECT_EQ(texts_of(other.get()), (std::vector<std::string>{"k:x"}));
  EXPECT_TRUE(b.drain(std::chrono::milliseconds(1000)));
  done = b.withdraw(ticket);  // "a" finished unseen: its result is there now
  ASSERT_TRUE(done[0]);
  EXPECT_EQ(done[0]->texts.at(0), "k:a");
  EXPECT_FALSE(done[1] || done[2]);
  EXPECT_EQ(rec.batches.size(), 2u);  // "a" and "x" only
  EXPECT_EQ(withdrawn.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
}

namespace {

// The HTTP status a body is refused with (0: accepted), and the message.
std::pair<int, std::string> refusal(const std::string& body, RequestLimits limits = {}) {
  try {
    parse_translate_request(body, limits);
    return {0, ""};
  } catch (const HttpError& e) {
    return {e.status, e.what()};
  }
}

}  // namespace

TEST(ServeRequest, FieldsAreReadAndCheckedByName) {
  const auto r = parse_translate_request(
      R"({"model": "en-de", "text": ["A b.", "C"], "format": "text", "beam": 4,
          "length_penalty": 0.6, "constraints": ["x y"], "avoid": [["p"], []],
          "alignment": true, "scores": true,
          "sampling": {"temperature": 0.7, "top_k": 5, "top_p": 0.9, "seed": 3}})",
      {});
  EXPECT_EQ(r.model, "en-de");
  EXPECT_EQ(r.texts, (std::vector<std::string>{"A b.", "C"}));
  EXPECT_EQ(r.format, "text");
  EXPECT_EQ(*r.beam, 4);
  EXPECT_DOUBLE_EQ(*r.length_penalty, 0.6);
  EXPECT_EQ(r.constraints, (std::vector<std::vector<std::string>>{{"x y"}, {"x y"}}));
  EXPECT_EQ(r.avoid, (std::vector<std::vector<std::string>>{{"p"}, {}}));
  EXPECT_EQ(r.alignment, "hard");
  EXPECT_TRUE(r.scores);
  EXPECT_TRUE(r.sampling);
  EXPECT_EQ(*r.top_k, 5);
  EXPECT_EQ(*r.seed, 3);
  const auto one = parse_translate_request(R"({"text": "Hi."})", {});
  EXPECT_EQ(one.texts, (std::vector<std::string>{"Hi."}));
  EXPECT_EQ(one.format, "lines");
  EXPECT_FALSE(one.beam.has_value());

  EXPECT_EQ(refusal("{\"text\": ").first, 400);
  EXPECT_EQ(refusal("[1]").first, 400);
  EXPECT_EQ(refusal("{}"), (std::pair<int, std::string>{400, "\"text\": missing"}));
  EXPECT_EQ(refusal(R"({"text": 3})").first, 400);
  EXPECT_EQ(refusal(R"({"text": ["a", 3]})").second, "\"text[1]\": must be a string");
  EXPECT_EQ(refusal(R"({"text": "a", "beam": 0})").second, "\"beam\": must be >= 1");
  EXPECT_EQ(refusal(R"({"text": "a", "beam": "5"})").second, "\"beam\": must be an integer");
  EXPECT_EQ(refusal(R"({"text": "a", "colour": 1})").second, "\"colour\": unknown field");
  EXPECT_EQ(refusal(R"({"text": "a", "format": "pdf"})").first, 400);
  EXPECT_EQ(refusal(R"({"text": "a", "sampling": {"heat": 1}})").first, 400);
  EXPECT_EQ(refusal(R"({"text": ["a", "b"], "avoid": [["x"]]})").second,
            "\"avoid\": 1 lists for 2 texts");
  RequestLimits small;
  small.max_texts = 2;
  small.max_text_chars = 3;
  EXPECT_EQ(refusal(R"({"text": ["a", "b", "c"]})", small).first, 413);
  EXPECT_EQ(refusal(R"({"text": "abcd"})", small).first, 413);
  EXPECT_EQ(refusal("{\"text\": \"\xc3\xa4\xc3\xa4\xc3\xa4\"}", small).first, 0);  // 3 characters
}
