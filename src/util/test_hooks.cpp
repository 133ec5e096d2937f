#include "util/test_hooks.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "util/util.h"

namespace nmt {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int64_t integer(const char* name, const std::string& text) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw Error(std::string(name) + ": \"" + text + "\" is not an integer");
}

std::vector<int64_t> steps(const char* name) {
  std::vector<int64_t> out;
  if (const char* v = env(name))
    for (const auto& part : split(v, ','))
      if (!trim(part).empty()) out.push_back(integer(name, trim(part)));
  return out;
}

TestHooks read_hooks() {
  TestHooks h;
  if (const char* v = env("NMT_DEBUG_FAIL_IO")) {
    const auto parts = split(v, ':');
    h.fail_io_at = integer("NMT_DEBUG_FAIL_IO", parts.at(0));
    h.fail_io_errno = ENOSPC;
    if (parts.size() > 1) {
      if (parts[1] == "EIO")
        h.fail_io_errno = EIO;
      else if (parts[1] != "ENOSPC")
        throw Error("NMT_DEBUG_FAIL_IO: unknown errno " + parts[1] + " (ENOSPC or EIO)");
    }
  }
  if (const char* v = env("NMT_DEBUG_IO_TRACE")) h.io_trace = v;
  h.nan_steps = steps("NMT_DEBUG_NAN_STEPS");
  h.oom_steps = steps("NMT_DEBUG_OOM_STEPS");
  if (const char* v = env("NMT_DEBUG_EXIT")) {
    const auto parts = split(v, ':');
    if (parts.size() != 2) throw Error(std::string("NMT_DEBUG_EXIT: expected RANK:STEP, got ") + v);
    h.exit_rank = static_cast<int>(integer("NMT_DEBUG_EXIT", parts[0]));
    h.exit_step = integer("NMT_DEBUG_EXIT", parts[1]);
  }
  if (const char* v = env("NMT_DEBUG_CHECK_REPLICAS")) h.check_replicas = std::string(v) == "1";
  h.no_bf16 = std::getenv("NMT_DEBUG_NO_BF16") != nullptr;
  if (const char* v = env("NMT_DEBUG_MEMORY_AVAILABLE"))
    h.memory_available = integer("NMT_DEBUG_MEMORY_AVAILABLE", v);
  return h;
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

bool TestHooks::nan_at(int64_t attempt) const { return contains(nan_steps, attempt); }
bool TestHooks::oom_at(int64_t attempt) const { return contains(oom_steps, attempt); }
void TestHooks::exit_if_asked(int rank, int64_t step, int restart) const {
  if (rank == exit_rank && step == exit_step && restart == 0) std::_Exit(1);
}

const TestHooks& test_hooks() {
  static const TestHooks hooks = read_hooks();
  return hooks;
}

}  // namespace nmt
