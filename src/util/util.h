// Small, dependency-free helpers shared by every layer: errors, text, files.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace nmt {

// Compiles a function three times, for AVX-512 (x86-64-v4), AVX2 and the baseline, and lets the
// loader pick the CPU's (GCC function clones): for loops that GCC vectorizes, where AVX-512
// brings what the baseline cannot (64-bit multiplies, 16 lanes). Nothing elsewhere.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define NMT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define NMT_CPU_CLONES
#endif

// SplitMix64's output function. splitmix64_mix(seed + k * kGoldenGamma) is the k-th value of
// the SplitMix64 stream from seed: one stateless 64-bit hash for batching and dropout masks.
constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;
inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Every user-facing failure is an Error; main catches it once and exits non-zero.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown to end the process with an exit status and no error message: main returns it.
class ExitStatus : public std::exception {
 public:
  explicit ExitStatus(int status) : status_(status) {}
  int status() const { return status_; }
  const char* what() const noexcept override { return "exit status"; }

 private:
  int status_;
};

// Thrown when a signal asked the process to stop after finishing its work cleanly: exit status
// 128 + signal, as shells expect.
class Interrupted : public ExitStatus {
 public:
  explicit Interrupted(int signal) : ExitStatus(128 + signal), signal_(signal) {}
  int signal() const { return signal_; }
  const char* what() const noexcept override { return "interrupted"; }

 private:
  int signal_;
};


// True when s is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool is_valid_utf8(std::string_view s);
// Replaces each invalid UTF-8 sequence and each NUL byte with U+FFFD; counts replacements.
std::string sanitize_utf8(std::string_view s, int64_t* replaced = nullptr);
// Code points of s. Each byte that does not start a valid sequence becomes U+FFFD, or with
// escape_invalid U+DC00 + byte (Python's surrogateescape), so distinct bad bytes stay distinct.
std::u32string decode_utf8(std::string_view s, bool escape_invalid = false);
// Appends one code point as UTF-8.
void append_utf8(std::string& out, char32_t cp);

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to word, or "" when none is within a third of its length (at least 2).
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

std::string trim(std::string_view s);
std::vector<std::string> split(std::string_view s, char sep);
// Drops one trailing '\r' so CRLF files read like LF files.
void chomp_cr(std::string& line);

bool file_exists(const std::string& path);
std::string read_file(const std::string& path);
// Every line of a file, plain or gzip, as LineReader reads them ("-": standard input).
std::vector<std::string> read_lines(const std::string& path);
// Bytes of memory this process may still take: MemAvailable of /proc/meminfo, or less when a
// cgroup limit leaves less; 0 when neither can be read.
int64_t available_memory_bytes();

// How many lines read_lines would give (of the decompressed text for gzip).
int64_t count_lines(const std::string& path);

// "H:MM:SS" (hours not wrapped), "?" for a negative or non-finite time.
std::string format_duration(double seconds);

// Number of hardware threads (at least 1).
int hardware_threads();

}  // namespace nmt

namespace nmt {
// This process's rank under a torchrun-style launch (RANK), 0 otherwise. Only rank 0 writes files.
int process_rank();
inline bool is_main_process() { return process_rank() == 0; }
}  // namespace nmt

namespace nmt {
// Keeps large freed blocks in the heap instead of returning them to the OS: training allocates
// the same [tokens x vocab] buffers every step, and fresh mmap'ed pages cost a page fault each.
void keep_freed_memory();
}  // namespace nmt
