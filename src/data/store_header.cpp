#include "data/store_header.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "util/hash.h"
#include "util/io.h"
#include "util/line_reader.h"
#include "util/util.h"

namespace nmt {

using nlohmann::json;

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

std::optional<std::string> file_change(const FileStamp& stamp) {
  struct stat st {};
  if (::stat(stamp.path.c_str(), &st) != 0)
    return stamp.path + " is gone (" + std::strerror(errno) + ")";
  const FileStamp now = stat_file(stamp.path);
  if (now.bytes != stamp.bytes)
    return stamp.path + " changed: " + std::to_string(stamp.bytes) + " bytes then, " +
           std::to_string(now.bytes) + " now";
  if (now.mtime_ns == stamp.mtime_ns) return std::nullopt;
  // A new time with the old size: the content decides (a copy or a touch changes nothing).
  LineReader reader(stamp.path);
  std::string line;
  while (reader.next(line)) {
  }
  if (hex64(reader.content_hash()) == stamp.hash) return std::nullopt;
  return stamp.path + " changed: same size, other content (modified since)";
}

VocabTraining VocabTraining::of(const Config& c) {
  const VocabConfig& v = c.vocab;
  VocabTraining t;
  t.joint = v.joint;
  t.size = v.size;
  t.model_type = name_of(v.model_type);
  t.character_coverage = v.character_coverage;
  t.input_sentence_size = v.input_sentence_size;
  t.max_sentence_length = v.max_sentence_length;
  t.src_model = v.src_model;
  t.tgt_model = v.tgt_model;
  t.tags = c.data.training.tags();
  return t;
}

bool VocabTraining::operator==(const VocabTraining& o) const {
  return joint == o.joint && size == o.size && model_type == o.model_type &&
         character_coverage == o.character_coverage &&
         input_sentence_size == o.input_sentence_size &&
         max_sentence_length == o.max_sentence_length && src_model == o.src_model &&
         tgt_model == o.tgt_model && tags == o.tags;
}

StoreFilters StoreFilters::of(const DataConfig& d) { return {d.max_len, d.max_len_ratio, d.dedup}; }

namespace {

// The filters as header.json holds them (and as describe() prints them).
json filters_json(const StoreFilters& f) {
  return {{"max_len", f.max_len}, {"max_len_ratio", f.max_len_ratio}, {"dedup", f.dedup}};
}

json stamp_json(const FileStamp& s) {
  return {{"path", s.path}, {"bytes", s.bytes}, {"mtime_ns", s.mtime_ns}, {"hash", s.hash}};
}

FileStamp stamp_from(const json& j) {
  return {j.at("path").get<std::string>(), j.at("bytes").get<int64_t>(),
          j.at("mtime_ns").get<int64_t>(), j.at("hash").get<std::string>()};
}

json stats_json(const CorpusStats& s) {
  return {{"read", s.total},         {"kept", s.kept},   {"empty", s.empty},
          {"too_long", s.too_long},  {"ratio", s.ratio}, {"duplicate", s.duplicate},
          {"invalid_utf8", s.invalid_utf8}};
}

CorpusStats stats_from(const json& j) {
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

json training_json(const VocabTraining& t) {
  json j = {{"joint", t.joint},
            {"size", t.size},
            {"model_type", t.model_type},
            {"character_coverage", t.character_coverage},
            {"input_sentence_size", t.input_sentence_size},
            {"src_model", t.src_model},
            {"tgt_model", t.tgt_model}};
  if (t.max_sentence_length > 0) j["max_sentence_length"] = t.max_sentence_length;
  if (!t.tags.empty()) j["tags"] = t.tags;
  return j;
}

VocabTraining training_from(const json& j) {
  VocabTraining t;
  t.joint = j.at("joint").get<bool>();
  t.size = j.at("size").get<int64_t>();
  t.model_type = j.at("model_type").get<std::string>();
  t.character_coverage = j.at("character_coverage").get<double>();
  t.input_sentence_size = j.at("input_sentence_size").get<int64_t>();
  t.max_sentence_length = j.value("max_sentence_length", int64_t{0});
  t.src_model = j.at("src_model").get<std::string>();
  t.tgt_model = j.at("tgt_model").get<std::string>();
  t.tags = j.value("tags", std::vector<std::string>{});
  return t;
}

json vocab_json(const StoreHeader& h) {
  json v = {{"joint", h.joint},
            {"src", h.src_vocab_hash},
            {"tgt", h.tgt_vocab_hash},
            {"trained", h.trained ? training_json(*h.trained) : json(nullptr)}};
  if (h.version >= 2) {
    v["src_size"] = h.src_vocab_size;
    v["tgt_size"] = h.tgt_vocab_size;
  }
  return v;
}

void vocab_from(const json& v, StoreHeader& h) {
  h.joint = v.at("joint").get<bool>();
  h.src_vocab_hash = v.at("src").get<std::string>();
  h.tgt_vocab_hash = v.at("tgt").get<std::string>();
  if (!v.at("trained").is_null()) h.trained = training_from(v.at("trained"));
  if (h.version >= 2) {
    h.src_vocab_size = v.at("src_size").get<int64_t>();
    h.tgt_vocab_size = v.at("tgt_size").get<int64_t>();
  }
}

}  // namespace

std::string StoreFilters::describe() const { return filters_json(*this).dump(); }

json StoreHeader::to_json() const {
  json inputs_json = json::array();
  for (const auto& in : inputs) {
    inputs_json.push_back({{"src", stamp_json(in.src)},
                           {"tgt", stamp_json(in.tgt)},
                           {"pairs", {in.begin, in.end}},
                           {"counts", stats_json(in.counts)}});
    if (!in.tag.empty()) inputs_json.back()["tag"] = in.tag;
  }
  json j = {{"format", "nmt token store"},
            {"version", version},
            {"pairs", pairs},
            {"tokens", {{"src", src_ids}, {"tgt", tgt_ids}, {"bytes_per_id", bytes_per_id}}},
            {"vocab", vocab_json(*this)},
            {"filters", filters_json(filters)},
            {"inputs", inputs_json},
            {"counts", stats_json(counts)}};
  if (version >= 2) j["checksums"] = checksums;
  return j;
}

StoreHeader StoreHeader::from_json(const json& j, const std::string& origin) {
  if (!j.is_object() || j.value("format", "") != "nmt token store")
    throw Error("not a token store: " + origin + " is another file");
  StoreHeader h;
  try {
    h.version = j.at("version").get<int>();
    if (h.version < kOldestStoreVersion || h.version > kStoreVersion)
      throw Error("token store " + origin + " has format version " + std::to_string(h.version) +
                  "; this nmt reads versions " + std::to_string(kOldestStoreVersion) + " to " +
                  std::to_string(kStoreVersion) + ": prepare it again");
    h.pairs = j.at("pairs").get<int64_t>();
    const json& t = j.at("tokens");
    h.src_ids = t.at("src").get<uint64_t>();
    h.tgt_ids = t.at("tgt").get<uint64_t>();
    h.bytes_per_id = t.at("bytes_per_id").get<int>();
    if (h.bytes_per_id != 2 && h.bytes_per_id != 4)
      throw Error("token store " + origin + ": bytes_per_id must be 2 or 4");
    vocab_from(j.at("vocab"), h);
    const json& f = j.at("filters");
    h.filters = {f.at("max_len").get<int64_t>(), f.at("max_len_ratio").get<double>(),
                 f.at("dedup").get<bool>()};
    for (const auto& in : j.at("inputs")) {
      const json& range = in.at("pairs");
      h.inputs.push_back({stamp_from(in.at("src")), stamp_from(in.at("tgt")),
                          range.at(0).get<int64_t>(), range.at(1).get<int64_t>(),
                          stats_from(in.at("counts")), in.value("tag", std::string())});
    }
    h.counts = stats_from(j.at("counts"));
    if (h.version >= 2) h.checksums = j.at("checksums").get<std::map<std::string, std::string>>();
  } catch (const json::exception& e) {
    throw Error("token store " + origin + " is damaged: " + e.what());
  }
  return h;
}

StoreHeader StoreHeader::read(const std::string& path) {
  if (!file_exists(path))
    throw Error("not a token store: " + path + " does not exist (prepare one with nmt prepare)");
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw Error("token store " + path + " is damaged: " + e.what());
  }
  return from_json(j, path);
}

void StoreHeader::write(const std::string& path) const {
  write_file_synced(path, to_json().dump(2) + "\n");
}

}  // namespace nmt
