#include "data/store.h"

#include <algorithm>
#include <map>

#include "util/hash.h"
#include "util/line_reader.h"
#include "util/util.h"

namespace nmt {

std::string vocab_hash(const SentencePiece& sp) { return hex64(hash64(sp.bytes())); }

namespace {

// The size a store file must have, or a clear refusal.
void expect_size(const std::string& path, size_t size, uint64_t bytes) {
  if (size != bytes)
    throw Error("token store " + path + " is incomplete or damaged: " + std::to_string(size) +
                " bytes, the header says " + std::to_string(bytes) + "; prepare it again");
}

constexpr size_t kVerifyBlock = 1 << 20;

// XXH3-64 of `bytes` bytes at `data`, in blocks; `each` sees every block after it is hashed,
// while it is in the cache.
template <class Fn>
std::string checksum_of(const uint8_t* data, size_t bytes, Fn&& each) {
  Checksum sum;
  for (size_t at = 0; at < bytes; at += kVerifyBlock) {
    const size_t n = std::min(kVerifyBlock, bytes - at);
    sum.update(data + at, n);
    each(data + at, n);
  }
  return hex64(sum.digest());
}

// The largest id of `n` ids at `p`.
template <class Id>
uint32_t max_id(const uint8_t* p, size_t n) {
  const Id* ids = reinterpret_cast<const Id*>(p);
  Id m = 0;
  for (size_t i = 0; i < n; ++i) m = ids[i] > m ? ids[i] : m;
  return m;
}

}  // namespace

std::unique_ptr<TokenStore> TokenStore::open(const std::string& dir, bool in_memory) {
  std::unique_ptr<TokenStore> s(new TokenStore());
  s->dir_ = dir;
  const std::string header_path = dir + "/header.json";
  if (!file_exists(header_path))
    throw Error("not a token store: " + dir + " has no header.json (prepare one with nmt prepare)");
  s->header_ = StoreHeader::read(header_path);
  s->pairs_ = s->header_.pairs;
  s->bytes_per_id_ = s->header_.bytes_per_id;
  s->map_files(in_memory);
  s->verify();
  return s;
}

void TokenStore::map_files(bool in_memory) {
  const auto pairs = static_cast<uint64_t>(pairs_);
  const uint64_t ids = header_.src_ids + header_.tgt_ids;
  offsets_file_ = MappedFile(dir_ + "/offsets.bin");
  expect_size(dir_ + "/offsets.bin", offsets_file_.size(), 8 * pairs);
  lengths_file_ = MappedFile(dir_ + "/lengths.bin");
  expect_size(dir_ + "/lengths.bin", lengths_file_.size(), 4 * pairs);
  const std::string tokens_path = dir_ + "/tokens.bin";
  const uint64_t token_bytes = ids * static_cast<uint64_t>(bytes_per_id_);
  if (in_memory) {
    const std::string bytes = read_file(tokens_path);
    expect_size(tokens_path, bytes.size(), token_bytes);
    tokens_memory_.assign(bytes.begin(), bytes.end());
    tokens_ = tokens_memory_.data();
  } else {
    tokens_file_ = MappedFile(tokens_path);
    expect_size(tokens_path, tokens_file_.size(), token_bytes);
    tokens_ = tokens_file_.data();
  }
  offsets_ = reinterpret_cast<const uint64_t*>(offsets_file_.data());
  lengths_ = reinterpret_cast<const uint16_t*>(lengths_file_.data());
  if (header_.checksums.count("text.bin") != 0) map_text();
}

// The header names text.bin only in stores that keep text.
void TokenStore::map_text() {
  const std::string offsets_path = dir_ + "/text_offsets.bin";
  text_offsets_file_ = MappedFile(offsets_path);
  const uint64_t entries = 2 * static_cast<uint64_t>(pairs_) + 1;
  expect_size(offsets_path, text_offsets_file_.size(), 8 * entries);
  text_offsets_ = reinterpret_cast<const uint64_t*>(text_offsets_file_.data());
  const std::string text_path = dir_ + "/text.bin";
  text_file_ = MappedFile(text_path);
  expect_size(text_path, text_file_.size(), text_offsets_[entries - 1]);
  // An empty text.bin maps to nothing; a store of empty sentences is no store (filters).
  static const uint8_t kNothing = 0;
  text_ = text_file_.size() > 0 ? text_file_.data() : &kNothing;
}

void TokenStore::text_checksums(std::map<std::string, std::string>& sums) const {
  const auto none = [](const uint8_t*, size_t) {};
  const size_t entries = 2 * static_cast<size_t>(pairs_) + 1;
  sums["text_offsets.bin"] = checksum_of(text_offsets_file_.data(), 8 * entries, none);
  sums["text.bin"] = checksum_of(text_, text_offsets_[entries - 1], none);
}

// The text index: it starts at 0 and never goes back (version 2 checksums come first).
void TokenStore::verify_text_index() const {
  const size_t entries = 2 * static_cast<size_t>(pairs_) + 1;
  if (text_offsets_[0] != 0)
    throw Error("token store " + dir_ + "/text_offsets.bin is damaged: the text starts at byte " +
                std::to_string(text_offsets_[0]) + "; prepare the store again");
  for (size_t k = 1; k < entries; ++k)
    if (text_offsets_[k] < text_offsets_[k - 1])
      throw Error("token store " + dir_ + "/text_offsets.bin is damaged: entry " +
                  std::to_string(k) + " goes back; prepare the store again");
}

void TokenStore::verify() const {
  const auto pairs = static_cast<size_t>(pairs_);
  const size_t token_bytes = (header_.src_ids + header_.tgt_ids) * bytes_per_id_;
  std::map<std::string, std::string> sums;
  uint32_t top = 0;
  sums["tokens.bin"] = checksum_of(tokens_, token_bytes, [&](const uint8_t* p, size_t n) {
    top = std::max(top, bytes_per_id_ == 2 ? max_id<uint16_t>(p, n / 2) : max_id<uint32_t>(p, n / 4));
  });
  const auto none = [](const uint8_t*, size_t) {};
  sums["offsets.bin"] = checksum_of(offsets_file_.data(), 8 * pairs, none);
  sums["lengths.bin"] = checksum_of(lengths_file_.data(), 4 * pairs, none);
  if (has_text()) text_checksums(sums);
  if (header_.version >= 2) {
    for (const auto& [name, sum] : sums) {
      const auto it = header_.checksums.find(name);
      if (it == header_.checksums.end())
        throw Error("token store " + dir_ + "/header.json is damaged: no checksum for " + name +
                    "; prepare the store again");
      if (it->second != sum)
        throw Error("token store " + dir_ + "/" + name + " is damaged: its checksum is " + sum +
                    ", the header says " + it->second + "; prepare the store again");
    }
  }
  if (has_text()) verify_text_index();
  // The index: each pair starts where the one before it ended, the last ends with the ids.
  uint64_t next = 0;
  for (size_t i = 0; i < pairs; ++i) {
    if (offsets_[i] != next)
      throw Error("token store " + dir_ + "/offsets.bin is damaged: pair " + std::to_string(i) +
                  " starts at id " + std::to_string(offsets_[i]) + ", the lengths say " +
                  std::to_string(next) + "; prepare the store again");
    next += static_cast<uint64_t>(lengths_[2 * i]) + lengths_[2 * i + 1];
  }
  if (next != header_.src_ids + header_.tgt_ids)
    throw Error("token store " + dir_ + "/lengths.bin is damaged: the pairs hold " +
                std::to_string(next) + " ids, the header says " +
                std::to_string(header_.src_ids + header_.tgt_ids) + "; prepare the store again");
  // A version 1 header has no sizes: the vocabulary the store carries gives them.
  int64_t src_size = header_.src_vocab_size, tgt_size = header_.tgt_vocab_size;
  if (src_size == 0 || tgt_size == 0) {
    const Vocabs v = vocabs();
    src_size = v.src.size();
    tgt_size = v.tgt.size();
  }
  if (top >= static_cast<uint32_t>(std::min(src_size, tgt_size)))
    find_bad_id(src_size, tgt_size);
  forget_length_pages();
  forget_id_pages();
}

// An id at or over the vocabulary size was seen: names the first pair that holds one (a joint
// vocabulary of one size: always; separate sizes: only when a side exceeds its own).
void TokenStore::find_bad_id(int64_t src_size, int64_t tgt_size) const {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < pairs_; ++i) {
    for (const bool src : {true, false}) {
      ids.clear();
      src ? append_src(i, ids) : append_tgt(i, ids);
      const int64_t size = src ? src_size : tgt_size;
      for (const int64_t id : ids)
        if (id >= size)
          throw Error("token store " + dir_ + "/tokens.bin is damaged: pair " + std::to_string(i) +
                      " holds id " + std::to_string(id) + " on its " +
                      (src ? "source" : "target") + " side, outside the vocabulary of " +
                      std::to_string(size) + " pieces; prepare the store again");
    }
  }
}

Vocabs TokenStore::vocabs() const { return read_vocabs(dir_, header_.joint); }

std::optional<std::string> TokenStore::vocab_mismatch(const Vocabs& vocabs) const {
  if (header_.joint != vocabs.joint)
    return std::string("it was encoded with ") +
           (vocabs.joint ? "separate vocabularies" : "one joint vocabulary");
  if (header_.src_vocab_hash != vocab_hash(vocabs.src) ||
      header_.tgt_vocab_hash != vocab_hash(vocabs.tgt))
    return "it was encoded with another vocabulary (hash " + header_.src_vocab_hash +
           ", this run's " + vocab_hash(vocabs.src) + ")";
  return std::nullopt;
}

std::vector<CorpusRange> TokenStore::corpora(const std::vector<double>& weights) const {
  std::vector<CorpusRange> out;
  const auto& inputs = header_.inputs;
  if (!weights.empty() && weights.size() != inputs.size())
    throw Error("token store " + dir_ + " holds " + std::to_string(inputs.size()) +
                " corpora but " + std::to_string(weights.size()) + " weights were given");
  for (size_t i = 0; i < inputs.size(); ++i)
    out.push_back({inputs[i].begin, inputs[i].end, weights.empty() ? 1.0 : weights[i]});
  return out;
}

void TokenStore::append(uint64_t offset, int64_t n, std::vector<int64_t>& out) const {
  if (bytes_per_id_ == 2) {
    const auto* p = reinterpret_cast<const uint16_t*>(tokens_) + offset;
    out.insert(out.end(), p, p + n);
  } else {
    const auto* p = reinterpret_cast<const uint32_t*>(tokens_) + offset;
    out.insert(out.end(), p, p + n);
  }
}

void TokenStore::append_src(int64_t i, std::vector<int64_t>& out) const {
  append(offsets_[i], lengths_[2 * i], out);
}

void TokenStore::append_tgt(int64_t i, std::vector<int64_t>& out) const {
  append(offsets_[i] + lengths_[2 * i], lengths_[2 * i + 1], out);
}

StoreWriter::StoreWriter(const std::string& dir, int bytes_per_id, bool keep_text)
    : bytes_per_id_(bytes_per_id),
      tokens_(dir + "/tokens.bin", OutFile::Mode::kTruncate),
      offsets_(dir + "/offsets.bin", OutFile::Mode::kTruncate),
      lengths_(dir + "/lengths.bin", OutFile::Mode::kTruncate) {
  if (!keep_text) return;
  text_.emplace(dir + "/text.bin", OutFile::Mode::kTruncate);
  text_offsets_.emplace(dir + "/text_offsets.bin", OutFile::Mode::kTruncate);
}

void StoreWriter::add(const std::vector<int>& x, const std::vector<int>& y,
                      std::string_view src_text, std::string_view tgt_text) {
  if (text_) {
    for (const std::string_view t : {src_text, tgt_text}) {
      write(*text_offsets_, text_offsets_sum_, &text_bytes_, sizeof text_bytes_);
      write(*text_, text_sum_, t.data(), t.size());
      text_bytes_ += t.size();
    }
  }
  const uint64_t offset = src_ids_ + tgt_ids_;
  write(offsets_, offsets_sum_, &offset, sizeof offset);
  const uint16_t lens[2] = {static_cast<uint16_t>(x.size()), static_cast<uint16_t>(y.size())};
  write(lengths_, lengths_sum_, lens, sizeof lens);
  write_ids(x);
  write_ids(y);
  src_ids_ += x.size();
  tgt_ids_ += y.size();
  ++pairs_;
}

void StoreWriter::finish() {
  std::vector<OutFile*> files = {&tokens_, &offsets_, &lengths_};
  if (text_) {
    write(*text_offsets_, text_offsets_sum_, &text_bytes_, sizeof text_bytes_);  // the end
    files.push_back(&*text_);
    files.push_back(&*text_offsets_);
  }
  for (OutFile* f : files) {
    f->sync();
    f->close();
  }
}

std::map<std::string, std::string> StoreWriter::checksums() const {
  std::map<std::string, std::string> out = {{"tokens.bin", hex64(tokens_sum_.digest())},
                                            {"offsets.bin", hex64(offsets_sum_.digest())},
                                            {"lengths.bin", hex64(lengths_sum_.digest())}};
  if (text_) {
    out["text.bin"] = hex64(text_sum_.digest());
    out["text_offsets.bin"] = hex64(text_offsets_sum_.digest());
  }
  return out;
}

void StoreWriter::write(OutFile& file, Checksum& sum, const void* data, size_t bytes) {
  sum.update(data, bytes);
  file.write({static_cast<const char*>(data), bytes});
}

void StoreWriter::write_ids(const std::vector<int>& ids) {
  if (bytes_per_id_ == 2) {
    narrow_.assign(ids.begin(), ids.end());
    write(tokens_, tokens_sum_, narrow_.data(), 2 * narrow_.size());
  } else {
    write(tokens_, tokens_sum_, ids.data(), 4 * ids.size());
  }
}

}  // namespace nmt
