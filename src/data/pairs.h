// Encoded training pairs by index, wherever they live: in memory (Corpus) or in a token store
// mapped from disk (TokenStore). Ids carry no BOS/EOS; the tensor layer adds them.
#pragma once

#include <cstdint>
#include <vector>

namespace nmt {

class Pairs {
 public:
  virtual ~Pairs() = default;
  virtual int64_t size() const = 0;
  // Pieces of pair i's source and target.
  virtual int64_t src_len(int64_t i) const = 0;
  virtual int64_t tgt_len(int64_t i) const = 0;
  // Appends pair i's source or target ids to `out`.
  virtual void append_src(int64_t i, std::vector<int64_t>& out) const = 0;
  virtual void append_tgt(int64_t i, std::vector<int64_t>& out) const = 0;
};

}  // namespace nmt
