#include "data/store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "util/hash.h"
#include "util/line_reader.h"
#include "util/util.h"

namespace nmt {

using nlohmann::json;

json FileStamp::to_json() const {
  return {{"path", path}, {"bytes", bytes}, {"mtime_ns", mtime_ns}, {"hash", hash}};
}

FileStamp FileStamp::from_json(const json& j) {
  FileStamp s;
  s.path = j.at("path").get<std::string>();
  s.bytes = j.at("bytes").get<int64_t>();
  s.mtime_ns = j.at("mtime_ns").get<int64_t>();
  s.hash = j.at("hash").get<std::string>();
  return s;
}

FileStamp stat_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error("cannot read " + path + ": " + std::strerror(errno));
  FileStamp s;
  s.path = path;
  s.bytes = static_cast<int64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return s;
}

std::string file_change(const FileStamp& stamp) {
  struct stat st {};
  if (::stat(stamp.path.c_str(), &st) != 0)
    return stamp.path + " is gone (" + std::strerror(errno) + ")";
  const FileStamp now = stat_file(stamp.path);
  if (now.bytes != stamp.bytes)
    return stamp.path + " changed: " + std::to_string(stamp.bytes) + " bytes then, " +
           std::to_string(now.bytes) + " now";
  if (now.mtime_ns == stamp.mtime_ns) return "";
  // A new time with the old size: the content decides (a copy or a touch changes nothing).
  LineReader reader(stamp.path);
  std::string line;
  while (reader.next(line)) {
  }
  if (hex64(reader.content_hash()) == stamp.hash) return "";
  return stamp.path + " changed: same size, other content (modified since)";
}

json stats_to_json(const CorpusStats& s) {
  return {{"read", s.total},         {"kept", s.kept},   {"empty", s.empty},
          {"too_long", s.too_long},  {"ratio", s.ratio}, {"duplicate", s.duplicate},
          {"invalid_utf8", s.invalid_utf8}};
}

CorpusStats stats_from_json(const json& j) {
  CorpusStats s;
  s.total = j.at("read").get<int64_t>();
  s.kept = j.at("kept").get<int64_t>();
  s.empty = j.at("empty").get<int64_t>();
  s.too_long = j.at("too_long").get<int64_t>();
  s.ratio = j.at("ratio").get<int64_t>();
  s.duplicate = j.at("duplicate").get<int64_t>();
  s.invalid_utf8 = j.at("invalid_utf8").get<int64_t>();
  return s;
}

std::string vocab_hash(const SentencePiece& sp) { return hex64(hash64(sp.bytes())); }

namespace {

// The size a store file must have, or a clear refusal.
void expect_size(const std::string& path, const MappedFile& file, uint64_t bytes) {
  if (file.size() != bytes)
    throw Error("token store " + path + " is incomplete or damaged: " +
                std::to_string(file.size()) + " bytes, the header says " + std::to_string(bytes));
}

}  // namespace

std::unique_ptr<TokenStore> TokenStore::open(const std::string& dir, bool in_memory) {
  std::unique_ptr<TokenStore> s(new TokenStore());
  s->dir_ = dir;
  const std::string header_path = dir + "/header.json";
  if (!file_exists(header_path))
    throw Error("not a token store: " + dir + " has no header.json (prepare one with nmt prepare)");
  try {
    s->header_ = json::parse(read_file(header_path));
  } catch (const json::exception& e) {
    throw Error("token store " + header_path + " is damaged: " + e.what());
  }
  const json& h = s->header_;
  try {
    if (h.value("format", "") != "nmt token store")
      throw Error("not a token store: " + header_path + " is another file");
    const int version = h.at("version").get<int>();
    if (version != kStoreVersion)
      throw Error("token store " + dir + " has format version " + std::to_string(version) +
                  "; this nmt reads version " + std::to_string(kStoreVersion) +
                  ": prepare it again");
    s->pairs_ = h.at("pairs").get<int64_t>();
    s->bytes_per_id_ = h.at("tokens").at("bytes_per_id").get<int>();
    const auto ids = h.at("tokens").at("src").get<uint64_t>() + h["tokens"].at("tgt").get<uint64_t>();
    if (s->bytes_per_id_ != 2 && s->bytes_per_id_ != 4)
      throw Error("token store " + header_path + ": bytes_per_id must be 2 or 4");
    const auto pairs = static_cast<uint64_t>(s->pairs_);
    s->offsets_file_ = MappedFile(dir + "/offsets.bin");
    expect_size(dir + "/offsets.bin", s->offsets_file_, 8 * pairs);
    s->lengths_file_ = MappedFile(dir + "/lengths.bin");
    expect_size(dir + "/lengths.bin", s->lengths_file_, 4 * pairs);
    const std::string tokens_path = dir + "/tokens.bin";
    if (in_memory) {
      const std::string bytes = read_file(tokens_path);
      if (bytes.size() != ids * static_cast<uint64_t>(s->bytes_per_id_))
        throw Error("token store " + tokens_path + " is incomplete or damaged: " +
                    std::to_string(bytes.size()) + " bytes, the header says " +
                    std::to_string(ids * s->bytes_per_id_));
      s->tokens_memory_.assign(bytes.begin(), bytes.end());
      s->tokens_ = s->tokens_memory_.data();
    } else {
      s->tokens_file_ = MappedFile(tokens_path);
      expect_size(tokens_path, s->tokens_file_, ids * static_cast<uint64_t>(s->bytes_per_id_));
      s->tokens_ = s->tokens_file_.data();
    }
    s->offsets_ = reinterpret_cast<const uint64_t*>(s->offsets_file_.data());
    s->lengths_ = reinterpret_cast<const uint16_t*>(s->lengths_file_.data());
    // The last pair must end where the ids do: a damaged index is caught here, not mid-run.
    if (pairs > 0 && s->offsets_[pairs - 1] + s->lengths_[2 * pairs - 2] +
                             s->lengths_[2 * pairs - 1] != ids)
      throw Error("token store " + dir + "/offsets.bin does not match tokens.bin");
  } catch (const json::exception& e) {
    throw Error("token store " + header_path + " is damaged: " + e.what());
  }
  return s;
}

Vocabs TokenStore::vocabs() const { return read_vocabs(dir_, header_.at("vocab").at("joint")); }

std::string TokenStore::vocab_mismatch(const Vocabs& vocabs) const {
  const json& v = header_.at("vocab");
  if (v.at("joint").get<bool>() != vocabs.joint)
    return std::string("it was encoded with ") + (vocabs.joint ? "separate vocabularies" : "one joint vocabulary");
  if (v.at("src").get<std::string>() != vocab_hash(vocabs.src) ||
      v.at("tgt").get<std::string>() != vocab_hash(vocabs.tgt))
    return "it was encoded with another vocabulary (hash " + v.at("src").get<std::string>() +
           ", this run's " + vocab_hash(vocabs.src) + ")";
  return "";
}

std::vector<CorpusRange> TokenStore::corpora(const std::vector<double>& weights) const {
  std::vector<CorpusRange> out;
  const json& inputs = header_.at("inputs");
  if (!weights.empty() && weights.size() != inputs.size())
    throw Error("token store " + dir_ + " holds " + std::to_string(inputs.size()) +
                " corpora but " + std::to_string(weights.size()) + " weights were given");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& range = inputs[i].at("pairs");
    out.push_back({range.at(0).get<int64_t>(), range.at(1).get<int64_t>(),
                   weights.empty() ? 1.0 : weights[i]});
  }
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

}  // namespace nmt
