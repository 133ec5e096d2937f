// A fast 64-bit hash of bytes, for telling files and sentence pairs apart (input change
// detection, duplicate pairs, vocabulary identity). Not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nmt {

// Streaming: update() with any split of the bytes gives the same digest().
class Hash64 {
 public:
  void update(std::string_view data);
  uint64_t digest() const;

 private:
  void mix(uint64_t word);
  uint64_t state_ = 0x6E6D742D68617368ULL;  // "nmt-hash"
  uint64_t tail_ = 0;                        // bytes of an unfinished 8-byte word
  int tail_bytes_ = 0;
  uint64_t length_ = 0;
};

uint64_t hash64(std::string_view data);

// XXH3-64 (xxHash), streaming: the token store's file checksums, at several GB/s. Any split of
// the bytes over update() gives the same digest().
class Checksum {
 public:
  Checksum();
  ~Checksum();
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;
  void update(const void* data, size_t bytes);
  uint64_t digest() const;

 private:
  void* state_;  // XXH3_state_t
};

// 16 lowercase hex digits.
std::string hex64(uint64_t value);

}  // namespace nmt
