#include "util/hash.h"

#include <cstdio>
#include <cstring>

#include "util/util.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace nmt {

void Hash64::mix(uint64_t word) {
  // One multiply-rotate round per word (as xxHash's), finished by SplitMix64 in digest().
  state_ ^= word * 0x87C37B91114253D5ULL;
  state_ = ((state_ << 31) | (state_ >> 33)) * 0x4CF5AD432745937FULL;
}

void Hash64::update(std::string_view data) {
  length_ += data.size();
  const char* p = data.data();
  size_t n = data.size();
  while (tail_bytes_ > 0 && tail_bytes_ < 8 && n > 0) {
    tail_ |= static_cast<uint64_t>(static_cast<unsigned char>(*p++)) << (8 * tail_bytes_++);
    --n;
  }
  if (tail_bytes_ == 8) {
    mix(tail_);
    tail_ = 0;
    tail_bytes_ = 0;
  }
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // little-endian machines only, as the store's files are
    mix(word);
  }
  for (; n > 0; --n) tail_ |= static_cast<uint64_t>(static_cast<unsigned char>(*p++))
                              << (8 * tail_bytes_++);
}

uint64_t Hash64::digest() const {
  uint64_t s = state_;
  if (tail_bytes_ > 0) {
    s ^= tail_ * 0x87C37B91114253D5ULL;
    s = ((s << 31) | (s >> 33)) * 0x4CF5AD432745937FULL;
  }
  return splitmix64_mix(s ^ length_);
}

uint64_t hash64(std::string_view data) {
  Hash64 h;
  h.update(data);
  return h.digest();
}

Checksum::Checksum() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw Error("out of memory for a checksum");
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Checksum::~Checksum() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Checksum::update(const void* data, size_t bytes) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, bytes);
}

uint64_t Checksum::digest() const {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

std::string hex64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

}  // namespace nmt
