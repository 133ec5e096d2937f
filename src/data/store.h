// The token store: a training corpus encoded once, on disk, read through a read-only mapping.
//
// A store is a directory:
//   header.json   format and version, the vocabulary's hash and size, each input's size, mtime,
//                 content hash and tag, the filters and what each dropped, the pair counts, and
//                 a checksum of each file below (store_header.h)
//   tokens.bin    the ids of every kept pair, source then target, pair after pair (uint16 when
//                 the vocabulary has at most 65536 pieces, else uint32; little-endian)
//   offsets.bin   uint64 a pair: where its ids start in tokens.bin, in ids
//   lengths.bin   uint16 source length, uint16 target length a pair
//   text.bin      only in stores made for subword sampling (data.*_sampling): the UTF-8 text
//                 of every kept pair, source then target, pair after pair, as it was encoded
//   text_offsets.bin  with text.bin: uint64 2 x pairs + 1: where each pair's source and target
//                 text start in text.bin, then its size
//   spm*.model    the vocabulary it was encoded with (vocabs.h names)
// It is written into a temporary directory and renamed into place once complete, so a
// directory under the store's name is either a whole store or none (see prepare.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/batching.h"
#include "data/corpus.h"
#include "data/pairs.h"
#include "data/store_header.h"
#include "text/vocabs.h"
#include "util/hash.h"
#include "util/io.h"
#include "util/mapped_file.h"

namespace nmt {

// The hash that identifies a vocabulary in a store's header.
std::string vocab_hash(const SentencePiece& sp);

class TokenStore : public Pairs {
 public:
  // Opens a store and proves it whole before any pair is read: every file has the size the header
  // says, its checksum matches (version 2), the offsets follow the lengths and every id is
  // inside the vocabulary. Throws Error with one line naming the file and what is wrong
  // otherwise. in_memory copies the ids into memory instead of mapping them.
  static std::unique_ptr<TokenStore> open(const std::string& dir, bool in_memory = false);

  const std::string& dir() const { return dir_; }
  const StoreHeader& header() const { return header_; }
  // The vocabulary stored with it.
  Vocabs vocabs() const;
  // Why it was not encoded with these vocabularies (nullopt when it was).
  std::optional<std::string> vocab_mismatch(const Vocabs& vocabs) const;
  // The inputs' pair ranges, with the given weights (one per input; empty: all 1).
  std::vector<CorpusRange> corpora(const std::vector<double>& weights = {}) const;
  const CorpusStats& stats() const { return header_.counts; }
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
    text_file_.forget_pages();
    text_offsets_file_.forget_pages();
  }

  // Whether it keeps the pairs' text (text.bin), which subword sampling re-encodes.
  bool has_text() const { return text_ != nullptr; }
  // Pair i's source or target text; has_text() must hold.
  std::string_view text(int64_t i, bool src) const {
    const uint64_t* o = text_offsets_ + 2 * i + (src ? 0 : 1);
    return {reinterpret_cast<const char*>(text_) + o[0], static_cast<size_t>(o[1] - o[0])};
  }

  int64_t size() const override { return pairs_; }
  int64_t src_len(int64_t i) const override { return lengths_[2 * i]; }
  int64_t tgt_len(int64_t i) const override { return lengths_[2 * i + 1]; }
  void append_src(int64_t i, std::vector<int64_t>& out) const override;
  void append_tgt(int64_t i, std::vector<int64_t>& out) const override;

 private:
  TokenStore() = default;
  void append(uint64_t offset, int64_t n, std::vector<int64_t>& out) const;
  void map_files(bool in_memory);
  void map_text();
  void verify() const;
  void text_checksums(std::map<std::string, std::string>& sums) const;
  void verify_text_index() const;
  void find_bad_id(int64_t src_size, int64_t tgt_size) const;

  std::string dir_;
  StoreHeader header_;
  int64_t pairs_ = 0;
  int bytes_per_id_ = 2;
  MappedFile tokens_file_, offsets_file_, lengths_file_, text_file_, text_offsets_file_;
  std::vector<uint8_t> tokens_memory_;  // in_memory: the ids
  const uint8_t* tokens_ = nullptr;
  const uint64_t* offsets_ = nullptr;
  const uint16_t* lengths_ = nullptr;
  const uint8_t* text_ = nullptr;  // null: no text.bin
  const uint64_t* text_offsets_ = nullptr;
};

// Writes a store's three data files (tokens.bin, offsets.bin, lengths.bin) pair after pair,
// checksumming what it writes; prepare (prepare.h) adds the header and renames the directory.
class StoreWriter {
 public:
  // bytes_per_id: 2 (uint16 ids) or 4. keep_text: write text.bin and text_offsets.bin too.
  StoreWriter(const std::string& dir, int bytes_per_id, bool keep_text = false);
  // src_text/tgt_text: what x and y encode (written only with keep_text).
  void add(const std::vector<int>& x, const std::vector<int>& y, std::string_view src_text = {},
           std::string_view tgt_text = {});
  // Syncs and closes the files.
  void finish();
  int64_t pairs() const { return pairs_; }
  uint64_t src_ids() const { return src_ids_; }
  uint64_t tgt_ids() const { return tgt_ids_; }
  // Each file's XXH3-64 of what was written, by name.
  std::map<std::string, std::string> checksums() const;

 private:
  static void write(OutFile& file, Checksum& sum, const void* data, size_t bytes);
  void write_ids(const std::vector<int>& ids);
  int bytes_per_id_;
  OutFile tokens_, offsets_, lengths_;
  Checksum tokens_sum_, offsets_sum_, lengths_sum_;
  std::optional<OutFile> text_, text_offsets_;  // with keep_text
  Checksum text_sum_, text_offsets_sum_;
  uint64_t text_bytes_ = 0;
  std::vector<uint16_t> narrow_;
  int64_t pairs_ = 0;
  uint64_t src_ids_ = 0, tgt_ids_ = 0;
};

}  // namespace nmt
