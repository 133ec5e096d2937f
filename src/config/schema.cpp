#include "config/schema.h"

#include <cmath>

namespace nmt {

std::string clip(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // whole chars
  return s.substr(0, cut) + "...";
}

Check<int64_t> at_least(int64_t lo) {
  return [lo](const int64_t& v) -> std::optional<std::string> {
    if (v < lo) return "must be >= " + std::to_string(lo) + ", got " + std::to_string(v);
    return std::nullopt;
  };
}

Check<int64_t> int_range(int64_t lo, int64_t hi) {
  return [lo, hi](const int64_t& v) -> std::optional<std::string> {
    if (v < lo || v > hi)
      return "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
             std::to_string(v);
    return std::nullopt;
  };
}

Check<double> in_range(double lo, double hi, bool hi_inclusive) {
  return [=](const double& v) -> std::optional<std::string> {
    if (!std::isfinite(v) || v < lo || (hi_inclusive ? v > hi : v >= hi)) {
      std::ostringstream os;
      os << "must be in [" << lo << ", " << hi << (hi_inclusive ? "]" : ")") << ", got " << v;
      return os.str();
    }
    return std::nullopt;
  };
}

Check<std::string> device_name() {
  return [](const std::string& v) -> std::optional<std::string> {
    if (is_device_name(v)) return std::nullopt;
    return "must be \"auto\", \"cpu\", \"cuda\" or \"cuda:N\", got \"" + clip(v) + "\"";
  };
}

Check<Duration> duration_at_most(double max_seconds) {
  return [max_seconds](const Duration& v) -> std::optional<std::string> {
    if (std::isfinite(v.seconds) && v.seconds >= 0 && v.seconds <= max_seconds) return std::nullopt;
    std::ostringstream os;
    os << "must be in [0, " << max_seconds << "] seconds, got " << v.seconds;
    return os.str();
  };
}

Check<std::string> not_empty() {
  return [](const std::string& v) -> std::optional<std::string> {
    if (v.empty()) return std::string("must not be empty");
    return std::nullopt;
  };
}

Check<std::string> tag_text() {
  return [](const std::string& v) -> std::optional<std::string> {
    if (v.empty()) return std::string("must not be empty (leave the key out for no tag)");
    if (v.size() > 64)
      return "must be at most 64 bytes, got " + std::to_string(v.size()) + ": \"" + clip(v) + "\"";
    if (v.find_first_of(" \t\n\r\v\f") != std::string::npos)
      return "must not contain whitespace, got \"" + clip(v) + "\"";
    // SentencePiece's user_defined_symbols option is a comma-separated list.
    if (v.find(',') != std::string::npos) return "must not contain ',', got \"" + clip(v) + "\"";
    for (const char* special : {"<pad>", "<unk>", "<s>", "</s>"})
      if (v == special) return "must not be the special piece " + v;
    return std::nullopt;
  };
}

}  // namespace nmt
