// Shared by the fuzz tests: a seeded generator and the case count and seed from the environment.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace nmt_test {

inline int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::stoll(v) : fallback;
}
inline int64_t fuzz_cases() { return env_int("NMT_FUZZ_CASES", 10000); }
inline uint64_t fuzz_seed() { return static_cast<uint64_t>(env_int("NMT_FUZZ_SEED", 20261122)); }

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  size_t below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(gen_);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(gen_); }
  char byte() { return static_cast<char>(below(256)); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  std::mt19937_64 gen_;
};

inline int64_t count_lines_in(const std::string& text) {
  return std::count(text.begin(), text.end(), '\n') + (!text.empty() && text.back() != '\n');
}

}  // namespace nmt_test
