// The token store's header.json, typed: one reader, one writer. Decisions about a store (reuse
// it, refuse a resume, trust its bytes) are made on these fields.
//
// Version 2 (written now) adds the vocabulary sizes and an XXH3-64 checksum of each data file;
// version 1 stores (without them) still open: their ids are checked against the vocabulary they
// carry, their bytes are not checksummed. Corpus tags (data.train[i].tag) are optional keys of
// version 2, written only when a corpus has one: a store without tags keeps its bytes, and
// older readers of version 2 ignore them.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/corpus.h"

namespace nmt {

constexpr int kStoreVersion = 2;
// The oldest version this nmt opens.
constexpr int kOldestStoreVersion = 1;

// A file as the store saw it: change detection by size and modification time, confirmed by the
// content hash (of the decompressed bytes) when those differ.
struct FileStamp {
  std::string path;
  int64_t bytes = 0;
  int64_t mtime_ns = 0;
  std::string hash;
};

// Size and modification time of a file as it is now (no hash).
FileStamp stat_file(const std::string& path);

// What changed in the file since `stamp` was taken (nullopt when nothing did): size, or content
// under a new modification time. Reads the file only when size or time differ.
std::optional<std::string> file_change(const FileStamp& stamp);

// The vocab keys a trained vocabulary depends on.
struct VocabTraining {
  bool joint = true;
  int64_t size = 0;
  std::string model_type;
  double character_coverage = 1.0;
  int64_t input_sentence_size = 0;
  int64_t max_sentence_length = 0;  // 0: a version 1 store (SentencePiece's 4192)
  std::string src_model, tgt_model;
  std::vector<std::string> tags;  // user-defined pieces of the source side (data.train's tags)
  static VocabTraining of(const Config& c);
  bool operator==(const VocabTraining& o) const;
};

// The filters a store's pairs went through (data.*).
struct StoreFilters {
  int64_t max_len = 0;
  double max_len_ratio = 0;
  bool dedup = false;
  static StoreFilters of(const DataConfig& d);
  bool operator==(const StoreFilters& o) const {
    return max_len == o.max_len && max_len_ratio == o.max_len_ratio && dedup == o.dedup;
  }
  std::string describe() const;  // as JSON: {"dedup":false,"max_len":128,"max_len_ratio":0.0}
};

// One input corpus: its files and the range of pairs it holds.
struct StoreInput {
  FileStamp src, tgt;
  int64_t begin = 0, end = 0;  // pairs [begin, end) of the store
  CorpusStats counts;
  std::string tag;  // its data.train tag, whose id starts each source sentence ("" = none)
};

struct StoreHeader {
  int version = kStoreVersion;
  int64_t pairs = 0;
  uint64_t src_ids = 0, tgt_ids = 0;  // ids of each side, all pairs
  int bytes_per_id = 2;               // 2 (uint16) or 4 (uint32)
  bool joint = true;                  // one vocabulary for both sides
  std::string src_vocab_hash, tgt_vocab_hash;  // vocab_hash() of each side
  int64_t src_vocab_size = 0, tgt_vocab_size = 0;  // pieces; 0 in version 1
  std::optional<VocabTraining> trained;  // how the vocabulary was trained (none: it was given)
  StoreFilters filters;
  std::vector<StoreInput> inputs;
  CorpusStats counts;  // all inputs together
  // Data file name -> XXH3-64 of its bytes, 16 hex digits (version 2).
  std::map<std::string, std::string> checksums;

  // Throws Error naming the file when it is missing, not a store header, of an unknown version
  // or missing a field.
  static StoreHeader read(const std::string& path);
  // Written and fsynced (inside the store's temporary directory).
  void write(const std::string& path) const;
  nlohmann::json to_json() const;
  static StoreHeader from_json(const nlohmann::json& j, const std::string& origin);
};

}  // namespace nmt
