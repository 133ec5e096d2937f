// The token store: a training corpus encoded once, on disk, read through a read-only mapping.
//
// A store is a directory:
//   header.json   format and version, the vocabulary's hash, each input's size, mtime and
//                 content hash, the filters and what each dropped, the pair counts
//   tokens.bin    the ids of every kept pair, source then target, pair after pair (uint16 when
//                 the vocabulary has at most 65536 pieces, else uint32; little-endian)
//   offsets.bin   uint64 a pair: where its ids start in tokens.bin, in ids
//   lengths.bin   uint16 source length, uint16 target length a pair
//   spm*.model    the vocabulary it was encoded with (vocabs.h names)
// It is written into a temporary directory and renamed into place once complete, so a
// directory under the store's name is either a whole store or none (see prepare.h).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batching.h"
#include "data/corpus.h"
#include "data/pairs.h"
#include "text/vocabs.h"
#include "util/mapped_file.h"

namespace nmt {

constexpr int kStoreVersion = 1;

// A file as the store saw it: change detection by size and modification time, confirmed by the
// content hash (of the decompressed bytes) when those differ.
struct FileStamp {
  std::string path;
  int64_t bytes = 0;
  int64_t mtime_ns = 0;
  std::string hash;
  nlohmann::json to_json() const;
  static FileStamp from_json(const nlohmann::json& j);
};

// Size and modification time of a file as it is now (no hash).
FileStamp stat_file(const std::string& path);

// What changed in the file since `stamp` was taken ("" when nothing did): size, or content
// under a new modification time. Reads the file only when size or time differ.
std::string file_change(const FileStamp& stamp);

nlohmann::json stats_to_json(const CorpusStats& s);
CorpusStats stats_from_json(const nlohmann::json& j);

// The hash that identifies a vocabulary in a store's header.
std::string vocab_hash(const SentencePiece& sp);

class TokenStore : public Pairs {
 public:
  // Opens a store; throws Error with the reason when DIR is not a complete store of this
  // format version (missing files, a file cut short, another version). in_memory copies the ids
  // into memory instead of mapping them.
  static std::unique_ptr<TokenStore> open(const std::string& dir, bool in_memory = false);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& header() const { return header_; }
  // The vocabulary stored with it.
  Vocabs vocabs() const;
  // Whether it was encoded with these vocabularies ("" when so, else why not).
  std::string vocab_mismatch(const Vocabs& vocabs) const;
  // The inputs' pair ranges, with the given weights (one per input; empty: all 1).
  std::vector<CorpusRange> corpora(const std::vector<double>& weights = {}) const;
  CorpusStats stats() const { return stats_from_json(header_["counts"]); }
  // The lengths as BatchPlan takes them: valid while the store lives.
  const uint16_t* lengths() const { return lengths_; }
  // Lets go of the pages the plan read (they stay in the page cache).
  void forget_length_pages() const { lengths_file_.forget_pages(); }
  // Lets go of the pages batches read: batches pick pairs all over the file, and each first read
  // maps the pages around it too, so without this the resident set grew by about 1 GB in 100
  // steps on 10M pairs. Reading them again costs a minor page fault each.
  void forget_id_pages() const {
    tokens_file_.forget_pages();
    offsets_file_.forget_pages();
  }

  int64_t size() const override { return pairs_; }
  int64_t src_len(int64_t i) const override { return lengths_[2 * i]; }
  int64_t tgt_len(int64_t i) const override { return lengths_[2 * i + 1]; }
  void append_src(int64_t i, std::vector<int64_t>& out) const override;
  void append_tgt(int64_t i, std::vector<int64_t>& out) const override;

 private:
  TokenStore() = default;
  void append(uint64_t offset, int64_t n, std::vector<int64_t>& out) const;

  std::string dir_;
  nlohmann::json header_;
  int64_t pairs_ = 0;
  int bytes_per_id_ = 2;
  MappedFile tokens_file_, offsets_file_, lengths_file_;
  std::vector<uint8_t> tokens_memory_;  // in_memory: the ids
  const uint8_t* tokens_ = nullptr;
  const uint64_t* offsets_ = nullptr;
  const uint16_t* lengths_ = nullptr;
};

}  // namespace nmt
