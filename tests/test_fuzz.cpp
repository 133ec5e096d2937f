// Generated hostile input for the config loader, many thousand cases of mutated JSON: deletions,
// type swaps, huge numbers, deep nesting, unknown keys, --set overrides. Every case is a valid
// config or an nmt::Error with a message. (Translate's input: test_fuzz_input.cpp.)
// NMT_FUZZ_CASES (default 10000) and NMT_FUZZ_SEED (default fixed) widen or vary a run; a
// failure names the seed and case so it can be replayed.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "config/config.h"
#include "config/parse.h"
#include "config/print.h"
#include "decode/translate.h"
#include "fuzz_helpers.h"
#include "helpers.h"
#include "quickstart_run.h"
#include "util/util.h"

using nlohmann::json;
using nmt::Config;
using nmt_test::QuickstartRun;
using nmt_test::run_command;
using nmt_test::Rng;
using nmt_test::fuzz_cases;
using nmt_test::fuzz_seed;

namespace {

// ---------------------------------------------------------------- config loader

// Placeholders put into the JSON tree and expanded after printing it: nesting too deep to build
// as a tree, and number literals a double or int64 cannot hold.
const std::string kDeepMark =
    "\x01"
    "DEEP\x01";
const std::string kNumberMark =
    "\x01"
    "NUM\x01";

std::string deep_text(Rng& r) {
  static const std::vector<size_t> depths = {3, 31, 32, 33, 1000, 100000};
  const size_t depth = r.pick(depths);
  const bool arrays = r.chance(0.5);
  std::string s;
  s.reserve(depth * 6);
  for (size_t i = 0; i < depth; ++i) s += arrays ? "[" : "{\"a\":";
  s += "1";
  s += std::string(depth, arrays ? ']' : '}');
  return s;
}

std::string huge_number_text(Rng& r) {
  static const std::vector<std::string> numbers = {"1e400",
                                                   "-1e400",
                                                   "1e-400",
                                                   "123456789012345678901234567890",
                                                   "18446744073709551616",
                                                   "-9223372036854775809",
                                                   "9223372036854775807",
                                                   "-0",
                                                   "0e0",
                                                   "1E+2",
                                                   "4096.0000000000001",
                                                   "1.7976931348623157e308",
                                                   "4.9e-324",
                                                   "00",
                                                   "-",
                                                   "1e",
                                                   "0x10",
                                                   "NaN",
                                                   "Infinity"};
  return r.pick(numbers);
}

// Replaces every printed placeholder with its expansion.
std::string expand_marks(std::string text, Rng& r) {
  for (const auto& [mark, make] :
       {std::pair<std::string, std::string (*)(Rng&)>{json(kDeepMark).dump(), deep_text},
        {json(kNumberMark).dump(), huge_number_text}}) {
    for (size_t pos; (pos = text.find(mark)) != std::string::npos;)
      text.replace(pos, mark.size(), make(r));
  }
  return text;
}

json random_value(Rng& r, const std::vector<std::string>& keys) {
  switch (r.below(16)) {
    case 0:
      return nullptr;
    case 1:
      return r.chance(0.5);
    case 2: {
      static const std::vector<int64_t> ints = {0,
                                                -1,
                                                1,
                                                2,
                                                3,
                                                7,
                                                8,
                                                64,
                                                129,
                                                4096,
                                                std::numeric_limits<int64_t>::max(),
                                                std::numeric_limits<int64_t>::min()};
      return r.pick(ints);
    }
    case 3:
      return std::numeric_limits<uint64_t>::max();
    case 4: {
      static const std::vector<double> reals = {0.5,    1.0,    -0.0,     4096.0,     4096.5, 1e308,
                                                -1e308, 5e-324, 0.999999, 1e15 + 0.5, 2.5e9};
      return r.pick(reals);
    }
    case 5:
      return "";
    case 6: {
      static const std::vector<std::string> words = {
          "sinusoidal", "learned",           "post",       "pre", "chrf", "bleu", "loss", "all",
          "bpe",        "/nonexistent/file", "caf\xc3\xa9"};
      return r.pick(words);
    }
    case 7:
      return r.pick(keys);
    case 8:
      return json::array();
    case 9:
      return json::object();
    case 10:
      return json::array({1, "two", nullptr});
    case 11:
      return json::object({{"d_model", 8}, {"x", json::array()}});
    case 12:
      return std::string(r.chance(0.5) ? 1000000 : 1000, 'x');
    case 13:
      return kDeepMark;
    case 14:
      return kNumberMark;
    default:
      return static_cast<int64_t>(r.below(100000)) - 100;
  }
}

// A key near a real one (typo, case, extra character) or something else entirely.
std::string unknown_key(Rng& r, const std::vector<std::string>& keys) {
  std::string k = r.pick(keys);
  switch (r.below(5)) {
    case 0:
      k[r.below(k.size())] ^= 0x20;
      break;
    case 1:
      k.erase(r.below(k.size()), 1);
      break;
    case 2:
      k.insert(r.below(k.size() + 1), 1, static_cast<char>('a' + r.below(26)));
      break;
    case 3:
      k = std::string(r.chance(0.5) ? 100000 : 3, 'k');
      break;
    default:
      k = "\xe2\x98\x83 \t\n\"key\"";
  }
  return k;
}

void collect_pointers(const json& j, const json::json_pointer& at,
                      std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) collect_pointers(*it, at / it.key(), out);
  if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) collect_pointers(j[i], at / i, out);
}

// One structural mutation: swap a value's type, delete a key, add an unknown key, or replace
// the whole document.
void mutate_tree(json& root, Rng& r, const std::vector<std::string>& keys) {
  std::vector<json::json_pointer> nodes;
  collect_pointers(root, json::json_pointer(), nodes);
  const auto& at = r.pick(nodes);
  json& node = root[at];
  switch (r.below(6)) {
    case 0:
    case 1:
      node = random_value(r, keys);
      break;
    case 2:
      if (!at.empty()) {
        json& parent = root[at.parent_pointer()];
        if (parent.is_object())
          parent.erase(at.back());
        else
          parent.erase(std::stoul(at.back()));
      }
      break;
    case 3:
      if (node.is_object()) node[unknown_key(r, keys)] = random_value(r, keys);
      break;
    case 4:
      if (node.is_object() && !node.empty()) {  // a whole section or key gone
        auto it = node.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(r.below(node.size())));
        node.erase(it);
      }
      break;
    default:
      if (r.chance(0.2)) root = random_value(r, keys);
  }
}

// One text mutation: the kinds of damage hand editing and truncated copies do.
void mutate_text(std::string& text, Rng& r) {
  static const std::string alphabet = "{}[],:\"\\0123456789-+.eE tfn\n\t\x00\xff\xc3\x80";
  const size_t n = text.size();
  switch (r.below(7)) {
    case 0:
      if (n > 0) text.erase(r.below(n), 1 + r.below(20));
      break;
    case 1:
      for (size_t i = 0, k = 1 + r.below(8); i < k; ++i)
        text.insert(r.below(text.size() + 1), 1,
                    r.chance(0.8) ? alphabet[r.below(alphabet.size())] : r.byte());
      break;
    case 2:
      text.resize(r.below(n + 1));
      break;
    case 3:
      if (n > 0) {
        const size_t a = r.below(n);
        text.insert(r.below(n + 1), text.substr(a, 1 + r.below(40)));
      }
      break;
    case 4: {  // a number literal becomes an out-of-range one
      std::vector<size_t> digits;
      for (size_t i = 0; i < n; ++i)
        if (std::isdigit(static_cast<unsigned char>(text[i])) &&
            (i == 0 || !std::isdigit(static_cast<unsigned char>(text[i - 1]))))
          digits.push_back(i);
      if (digits.empty()) break;
      const size_t at = r.pick(digits);
      size_t end = at;
      while (end < n && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
        ++end;
      text.replace(at, end - at, huge_number_text(r));
      break;
    }
    case 5:
      if (n > 0) text[r.below(n)] ^= static_cast<char>(1u << r.below(8));
      break;
    default:
      text = deep_text(r);
  }
}

// A --set override: a real or mutated key path and a value of any kind, or a malformed one.
std::string random_override(Rng& r, const std::vector<std::string>& keys) {
  std::string key = r.chance(0.7) ? r.pick(keys) : unknown_key(r, keys);
  std::string value;
  switch (r.below(5)) {
    case 0:
      value = expand_marks(random_value(r, keys).dump(), r);
      break;
    case 1:
      value = huge_number_text(r);
      break;
    case 2:
      value = "not json {";
      break;
    case 3:
      value = "caf\xe9";
      break;  // Latin-1: not UTF-8
    default:
      value = std::to_string(static_cast<int64_t>(r.below(5000)));
  }
  switch (r.below(8)) {
    case 0:
      return key;  // no '='
    case 1:
      return "=" + value;
    case 2:
      return key + "..x=" + value;
    case 3:
      return "train.max_steps.deeper=" + value;
    default:
      return key + "=" + value;
  }
}

struct ConfigCase {
  std::string text;
  std::vector<std::string> overrides;
};

class ConfigFuzzer {
 public:
  explicit ConfigFuzzer(uint64_t seed) : rng_(seed) {
    for (const char* f : {"configs/quickstart.json", "configs/multi30k_en_de_base.json",
                          "configs/quickstart_rnn.json", "configs/multi30k_en_de_rnn.json"})
      seeds_.push_back(nmt_test::read_text(nmt_test::source_dir() + "/" + f));
    Config minimal;
    minimal.train.max_steps = 1;
    seeds_.push_back(nmt::config_to_json(minimal));
    Config rnn = minimal;  // arch rnn: the model.rnn section, no Transformer keys
    rnn.model.arch = nmt::Arch::kRnn;
    seeds_.push_back(nmt::config_to_json(rnn));
    // Named: a range-for over items() of a temporary would iterate a destroyed object.
    const json rnn_keys = json::parse(seeds_.back())["model"]["rnn"];
    for (const auto& k : rnn_keys.items()) keys_.push_back("model.rnn." + k.key());
    seeds_.push_back("{\"train\": {\"max_steps\": 10}}");
    seeds_.push_back("{}");
    const json all = json::parse(nmt::config_to_json(minimal));
    for (auto s = all.begin(); s != all.end(); ++s)
      for (auto k = s->begin(); k != s->end(); ++k) keys_.push_back(s.key() + "." + k.key());
    for (auto s = all.begin(); s != all.end(); ++s) keys_.push_back(s.key());
  }

  ConfigCase next() {
    ConfigCase c;
    json tree = json::parse(rng_.pick(seeds_));
    for (size_t i = 0, k = rng_.below(4); i < k; ++i) mutate_tree(tree, rng_, keys_);
    c.text = expand_marks(tree.dump(rng_.chance(0.5) ? 2 : -1), rng_);
    if (rng_.chance(0.4))
      for (size_t i = 0, k = 1 + rng_.below(3); i < k; ++i) mutate_text(c.text, rng_);
    if (rng_.chance(0.25))
      for (size_t i = 0, k = 1 + rng_.below(3); i < k; ++i)
        c.overrides.push_back(random_override(rng_, keys_));
    return c;
  }

 private:
  Rng rng_;
  std::vector<std::string> seeds_;
  std::vector<std::string> keys_;
};

enum class Outcome { kValid, kRejected, kWrongException };

struct ConfigResult {
  Outcome outcome;
  std::string text;  // the config JSON, or the error message
};

ConfigResult load(const ConfigCase& c, const std::string& origin = "fuzz") {
  try {
    return {Outcome::kValid, nmt::config_to_json(nmt::parse_config(c.text, c.overrides, origin))};
  } catch (const nmt::Error& e) {
    return {Outcome::kRejected, e.what()};
  } catch (const std::exception& e) {
    return {Outcome::kWrongException, e.what()};
  }
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

TEST(ConfigFuzz, MutatedJsonGivesAValidConfigOrAClearError) {
  const int64_t cases = fuzz_cases();
  const uint64_t seed = fuzz_seed();
  ConfigFuzzer fuzzer(seed);
  int64_t valid = 0, rejected = 0;
  double slowest_ms = 0;
  for (int64_t i = 0; i < cases; ++i) {
    const ConfigCase c = fuzzer.next();
    const auto start = std::chrono::steady_clock::now();
    const ConfigResult r = load(c);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    slowest_ms = std::max(slowest_ms, ms);
    // A hang detector, not a speed goal: the largest case is a few MB of text.
    EXPECT_LT(ms, 5000.0) << "seed " << seed << " case " << i;
    switch (r.outcome) {
      case Outcome::kValid: {
        ++valid;
        // What was accepted prints back and reloads to the same config.
        EXPECT_EQ(load({r.text, {}}).text, r.text) << "seed " << seed << " case " << i;
        break;
      }
      case Outcome::kRejected:
        ++rejected;
        EXPECT_FALSE(r.text.empty()) << "seed " << seed << " case " << i;
        EXPECT_LT(r.text.size(), 1000u)
            << "seed " << seed << " case " << i << ": " << r.text.substr(0, 300);
        break;
      case Outcome::kWrongException:
        ADD_FAILURE() << "seed " << seed << " case " << i
                      << ": not an nmt::Error: " << r.text.substr(0, 300) << "\n"
                      << c.text.substr(0, 300);
    }
  }
  std::printf("config fuzz: %lld cases (seed %llu): %lld valid, %lld rejected, slowest %.1f ms\n",
              static_cast<long long>(cases), static_cast<unsigned long long>(seed),
              static_cast<long long>(valid), static_cast<long long>(rejected), slowest_ms);
  RecordProperty("cases", std::to_string(cases));
  RecordProperty("valid", std::to_string(valid));
  // The mutations must leave some configs valid, or the valid path goes untested.
  EXPECT_GT(valid, cases / 50);
  EXPECT_GT(rejected, cases / 2);
}

// The same generator through the binary: exit 0 with the config, or exit 1 with the one-line
// message the loader gave. Never a signal.
TEST(ConfigFuzz, BinaryPrintsTheConfigOrExitsOneWithTheMessage) {
  nmt_test::TempDir dir;
  ConfigFuzzer fuzzer(fuzz_seed() + 1);
  const int64_t cases = std::max<int64_t>(1, std::min<int64_t>(40, fuzz_cases() / 250));
  for (int64_t i = 0; i < cases; ++i) {
    ConfigCase c = fuzzer.next();
    for (auto& o : c.overrides) o.erase(std::remove(o.begin(), o.end(), '\0'), o.end());
    const std::string path = dir / ("case" + std::to_string(i) + ".json");
    const ConfigResult expected = load(c, path);
    ASSERT_NE(expected.outcome, Outcome::kWrongException) << expected.text.substr(0, 300);
    nmt_test::write_text(path, c.text);
    std::string command = nmt_test::nmt_bin() + " train --dump-config --config " + path;
    for (const auto& o : c.overrides) command += " --set " + shell_quote(o);
    const auto r = nmt_test::run_command(command + " 2>&1");
    if (expected.outcome == Outcome::kValid) {
      EXPECT_EQ(r.status, 0) << "case " << i << ": " << r.output.substr(0, 300);
      EXPECT_EQ(r.output, expected.text + "\n") << "case " << i;
    } else {
      EXPECT_EQ(r.status, 1) << "case " << i << ": " << r.output.substr(0, 300);
      EXPECT_NE(r.output.find("nmt: error: " + expected.text), std::string::npos)
          << "case " << i << ": " << r.output.substr(0, 300);
    }
  }
}

// ---------------------------------------------------------------- translate input
