#include "data/prepare.h"

#include "data/vocab_sample.h"

#include <spdlog/spdlog.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "config/print.h"
#include "util/hash.h"
#include "util/io.h"
#include "util/line_reader.h"
#include "util/test_hooks.h"
#include "util/util.h"

namespace nmt {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string absolute_path(const std::string& path) {
  return fs::absolute(path).lexically_normal().string();
}

// The inputs' absolute paths, as the header records them.
std::vector<std::pair<std::string, std::string>> input_paths(const Config& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& k : c.data.training.corpora)
    out.emplace_back(absolute_path(k.src), absolute_path(k.tgt));
  return out;
}

// A block of pairs on its way through the encoders.
struct Chunk {
  std::vector<std::string> src, tgt;
  std::vector<char> invalid;             // a side is not valid UTF-8 or holds NUL
  std::vector<std::vector<int>> x, y;    // the ids
  std::vector<uint64_t> hash;            // of the pair's text, with dedup
};

constexpr size_t kChunkPairs = 4096;

// Worker threads that encode chunks; results come back by sequence number.
class Encoders {
 public:
  // tag_id >= 0: the corpus's tag, put before every source sentence's ids.
  Encoders(const Vocabs& vocabs, bool hash, int threads, int tag_id)
      : vocabs_(vocabs), hash_(hash), tag_id_(tag_id) {
    for (int t = 0; t < std::max(1, threads); ++t) workers_.emplace_back([this] { work(); });
  }
  ~Encoders() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    more_.notify_all();
    for (auto& w : workers_) w.join();
  }
  void submit(int64_t seq, std::unique_ptr<Chunk> chunk) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      todo_.emplace_back(seq, std::move(chunk));
    }
    more_.notify_one();
  }
  std::unique_ptr<Chunk> wait(int64_t seq) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return error_ || done_.count(seq) > 0; });
    if (error_) std::rethrow_exception(error_);
    auto chunk = std::move(done_[seq]);
    done_.erase(seq);
    return chunk;
  }

 private:
  void work() {
    for (;;) {
      std::pair<int64_t, std::unique_ptr<Chunk>> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        more_.wait(lock, [&] { return stop_ || !todo_.empty(); });
        if (stop_) return;
        job = std::move(todo_.front());
        todo_.pop_front();
      }
      try {
        encode(*job.second);
        const std::lock_guard<std::mutex> lock(mutex_);
        done_[job.first] = std::move(job.second);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      done_cv_.notify_all();
    }
  }
  void encode(Chunk& c) const {
    const size_t n = c.src.size();
    c.invalid.assign(n, 0);
    c.x.assign(n, {});
    c.y.assign(n, {});
    if (hash_) c.hash.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const auto& a = c.src[i];
      const auto& b = c.tgt[i];
      if (!PairFilter::valid_text(a) || !PairFilter::valid_text(b)) {
        c.invalid[i] = 1;
        continue;
      }
      c.x[i] = vocabs_.src.encode(a);
      c.y[i] = vocabs_.tgt.encode(b);
      // An empty side stays empty, so the filter still drops it.
      put_tag(c.x[i], tag_id_);
      if (hash_) {
        Hash64 h;
        // A tagged pair is not a duplicate of the same text untagged.
        if (tag_id_ >= 0) h.update(std::to_string(tag_id_) + '\0');
        h.update(a);
        h.update(std::string_view("\0", 1));
        h.update(b);
        c.hash[i] = h.digest();
      }
    }
  }

  const Vocabs& vocabs_;
  const bool hash_;
  const int tag_id_;
  std::mutex mutex_;
  std::condition_variable more_, done_cv_;
  std::deque<std::pair<int64_t, std::unique_ptr<Chunk>>> todo_;
  std::map<int64_t, std::unique_ptr<Chunk>> done_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// 64-bit hashes seen, open addressing (0 marks a free slot), for data.dedup.
class HashSet {
 public:
  // True when h was not there yet.
  bool insert(uint64_t h) {
    if (h == 0) h = 1;
    if (2 * (used_ + 1) > slots_.size()) grow();
    size_t i = static_cast<size_t>(splitmix64_mix(h)) & (slots_.size() - 1);
    while (slots_[i] != 0) {
      if (slots_[i] == h) return false;
      i = (i + 1) & (slots_.size() - 1);
    }
    slots_[i] = h;
    ++used_;
    return true;
  }

 private:
  void grow() {
    std::vector<uint64_t> old = std::move(slots_);
    slots_.assign(old.empty() ? 1 << 16 : 2 * old.size(), 0);
    used_ = 0;
    for (const uint64_t h : old)
      if (h != 0) insert(h);
  }
  std::vector<uint64_t> slots_;
  size_t used_ = 0;
};

// Reads up to kChunkPairs aligned lines; null at the end of both files. Refuses files that end
// apart, naming both line counts.
std::unique_ptr<Chunk> read_chunk(LineReader& src, LineReader& tgt) {
  auto c = std::make_unique<Chunk>();
  std::string a, b;
  while (c->src.size() < kChunkPairs) {
    const bool has_a = src.next(a), has_b = tgt.next(b);
    if (has_a != has_b) {
      while (src.next(a)) {
      }
      while (tgt.next(b)) {
      }
      throw Error("line counts differ: " + src.path() + " has " + std::to_string(src.lines()) +
                  " lines, " + tgt.path() + " has " + std::to_string(tgt.lines()));
    }
    if (!has_a) break;
    c->src.push_back(std::move(a));
    c->tgt.push_back(std::move(b));
  }
  if (c->src.empty()) return nullptr;
  return c;
}

// Applies the filters to an encoded chunk in order and writes what they keep.
struct Filters {
  PairFilter pair;
  bool dedup;
  HashSet seen;

  void apply(Chunk& c, StoreWriter& out, CorpusStats& s) {
    for (size_t i = 0; i < c.src.size(); ++i) {
      ++s.total;
      if (c.invalid[i] != 0) {
        ++s.invalid_utf8;
        continue;
      }
      if (!pair.keep(c.x[i], c.y[i], s)) continue;
      if (dedup && !seen.insert(c.hash[i])) {
        ++s.duplicate;
        continue;
      }
      out.add(c.x[i], c.y[i], c.src[i], c.tgt[i]);
      ++s.kept;
    }
  }
};

// Encodes one corpus into `out`, each source after tag_id when it is >= 0; returns its header
// entry.
StoreInput encode_corpus_file(const CorpusConfig& corpus, int tag_id, const Vocabs& vocabs,
                              Filters& filters, int threads, StoreWriter& out, CorpusStats& total) {
  const int64_t begin = out.pairs();
  FileStamp src_stamp = stat_file(absolute_path(corpus.src));
  FileStamp tgt_stamp = stat_file(absolute_path(corpus.tgt));
  LineReader src(corpus.src), tgt(corpus.tgt);
  CorpusStats s;
  {
    Encoders encoders(vocabs, filters.dedup, threads, tag_id);
    const int64_t in_flight = 2 * std::max(1, threads) + 2;
    int64_t submitted = 0, written = 0;
    bool more = true;
    auto last_log = std::chrono::steady_clock::now();
    for (;;) {
      while (more && submitted - written < in_flight) {
        auto chunk = read_chunk(src, tgt);
        if (!chunk) {
          more = false;
          break;
        }
        encoders.submit(submitted++, std::move(chunk));
      }
      if (written == submitted) break;
      filters.apply(*encoders.wait(written++), out, s);
      if (std::chrono::steady_clock::now() - last_log > std::chrono::seconds(30)) {
        last_log = std::chrono::steady_clock::now();
        spdlog::info("prepare: {} pairs of {} read", s.total, corpus.src);
      }
    }
  }
  src_stamp.hash = hex64(src.content_hash());
  tgt_stamp.hash = hex64(tgt.content_hash());
  total += s;
  spdlog::info(
      "prepared {}: {} pairs read, {} kept; dropped {} empty, {} over max_len, {} invalid UTF-8, "
      "{} over max_len_ratio, {} duplicates",
      corpus.src, s.total, s.kept, s.empty, s.too_long, s.invalid_utf8, s.ratio, s.duplicate);
  return {src_stamp, tgt_stamp, begin, out.pairs(), s, corpus.tag};
}

// Each corpus's tag as a piece id of the source vocabulary (-1: untagged). Throws Error naming
// the key when a tag is not one piece of it.
std::vector<int> corpus_tag_ids(const TrainingData& t, const SentencePiece& src) {
  std::vector<int> ids;
  for (size_t i = 0; i < t.corpora.size(); ++i) {
    const std::string& tag = t.corpora[i].tag;
    const std::optional<int> id = tag_piece(src, tag);
    if (!tag.empty() && !id)
      throw Error(t.key(i, "tag") + ": \"" + tag +
                  "\" is not one piece of the source vocabulary (a trained vocabulary has it; a "
                  "given vocab.model or vocab.src_model must hold it too)");
    if (id) spdlog::info("{}: tag {} is piece {}", t.corpora[i].src, tag, *id);
    ids.push_back(id ? *id : -1);
  }
  return ids;
}

}  // namespace

namespace {

// Whether a process with this id runs on this machine.
bool process_runs(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

// The files a store's temporary directory may hold.
bool only_store_files(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != "tokens.bin" && name != "offsets.bin" && name != "lengths.bin" &&
        name != "header.json" && name.rfind("spm", 0) != 0)
      return false;
  }
  return !ec;
}

}  // namespace

int remove_stale_store_temps(const std::string& dir) {
  const fs::path target = fs::absolute(dir).lexically_normal();
  const fs::path parent = target.parent_path();
  const std::string prefix = target.filename().string() + ".tmp-";
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !entry.is_directory(ec)) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (process_runs(std::stol(pid)) || !only_store_files(entry.path())) continue;
    fs::remove_all(entry.path(), ec);
    if (ec) continue;
    spdlog::info("removed {}, left by an nmt prepare (process {}) that no longer runs",
                 entry.path().string(), pid);
    ++removed;
  }
  return removed;
}

namespace {

// The header of a store of the config's corpora encoded with `vocabs`.
StoreHeader make_header(const Config& c, const Vocabs& vocabs, bool trained,
                        const StoreWriter& out, int bytes_per_id) {
  StoreHeader h;
  h.pairs = out.pairs();
  h.src_ids = out.src_ids();
  h.tgt_ids = out.tgt_ids();
  h.bytes_per_id = bytes_per_id;
  h.joint = vocabs.joint;
  h.src_vocab_hash = vocab_hash(vocabs.src);
  h.tgt_vocab_hash = vocab_hash(vocabs.tgt);
  h.src_vocab_size = vocabs.src.size();
  h.tgt_vocab_size = vocabs.tgt.size();
  if (trained) h.trained = VocabTraining::of(c);
  h.filters = StoreFilters::of(c.data);
  h.checksums = out.checksums();
  return h;
}

}  // namespace

void prepare_store(const Config& c, const Vocabs* given, const std::string& dir, int threads) {
  const auto start = std::chrono::steady_clock::now();
  remove_stale_store_temps(dir);
  const std::string tmp = dir + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    create_directories(tmp);
    // The vocabulary on train.threads, not `threads`: SentencePiece's training differs with
    // its thread count, and the store's bytes must not depend on the encoding threads.
    const Vocabs vocabs = given != nullptr ? *given : train_vocabs(c, effective_threads(c));
    const int bytes_per_id = std::max(vocabs.src.size(), vocabs.tgt.size()) <= 65536 ? 2 : 4;
    StoreWriter out(tmp, bytes_per_id, needs_text(c));
    Filters filters{{c.data.max_len, c.data.max_len_ratio, false}, c.data.dedup, {}};
    CorpusStats total;
    std::vector<StoreInput> inputs;
    const auto& corpora = c.data.training.corpora;
    const std::vector<int> tag_ids = corpus_tag_ids(c.data.training, vocabs.src);
    for (size_t i = 0; i < corpora.size(); ++i)
      inputs.push_back(
          encode_corpus_file(corpora[i], tag_ids[i], vocabs, filters, threads, out, total));
    out.finish();
    if (out.pairs() == 0) throw Error("no training pairs left after filtering " + corpora[0].src);
    write_vocabs(tmp, vocabs);
    StoreHeader header = make_header(c, vocabs, given == nullptr, out, bytes_per_id);
    header.inputs = std::move(inputs);
    header.counts = total;
    header.write(tmp + "/header.json");
    fsync_dir(tmp);
    const auto parent = fs::path(dir).parent_path();
    if (!parent.empty()) create_directories(parent.string());
    replace_directory(tmp, dir);
    fsync_dir(parent.empty() ? "." : parent.string());
  } catch (...) {
    fs::remove_all(tmp, ec);  // gone already once renamed; a failure after that leaves DIR whole
    throw;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("token store {} ready in {:.1f} s", dir, seconds);
}

bool needs_text(const Config& c) {
  return c.data.src_sampling.enabled || c.data.tgt_sampling.enabled;
}

std::string store_key(const Config& c) {
  json inputs = json::array();
  const auto paths = input_paths(c);
  for (size_t i = 0; i < paths.size(); ++i) {
    inputs.push_back({{"src", paths[i].first}, {"tgt", paths[i].second}});
    // Only when tagged: untagged configs keep the key their stores have.
    const std::string& tag = c.data.training.corpora[i].tag;
    if (!tag.empty()) inputs.back()["tag"] = tag;
  }
  const StoreFilters f = StoreFilters::of(c.data);
  const VocabTraining v = VocabTraining::of(c);
  json recipe = {
      {"inputs", inputs},
      {"filters", {{"max_len", f.max_len}, {"max_len_ratio", f.max_len_ratio}, {"dedup", f.dedup}}},
      {"vocab",
       {{"joint", v.joint}, {"size", v.size}, {"model_type", v.model_type},
        {"character_coverage", v.character_coverage},
        {"input_sentence_size", v.input_sentence_size},
        {"max_sentence_length", v.max_sentence_length}, {"model", c.vocab.model},
        {"src_model", v.src_model}, {"tgt_model", v.tgt_model}}}};
  // Only when kept: stores without text keep their keys.
  if (needs_text(c)) recipe["text"] = true;
  return hex64(hash64(recipe.dump()));
}

StoreMismatch store_mismatch(const TokenStore& store, const Config& c, const Vocabs* vocabs) {
  using Kind = StoreMismatch::Kind;
  const StoreHeader& h = store.header();
  const auto want = input_paths(c);
  if (h.inputs.size() != want.size())
    return {Kind::kCorpora, "it holds " + std::to_string(h.inputs.size()) +
                                " corpora, the config names " + std::to_string(want.size())};
  for (size_t i = 0; i < want.size(); ++i) {
    if (h.inputs[i].src.path != want[i].first)
      return {Kind::kCorpora, "it was made from " + h.inputs[i].src.path + ", not " + want[i].first};
    if (h.inputs[i].tgt.path != want[i].second)
      return {Kind::kCorpora,
              "it was made from " + h.inputs[i].tgt.path + ", not " + want[i].second};
    const std::string& tag = c.data.training.corpora[i].tag;
    if (h.inputs[i].tag != tag)
      return {Kind::kCorpora, "its corpus " + want[i].first + " has tag \"" + h.inputs[i].tag +
                                  "\", the config gives \"" + tag + "\""};
  }
  if (!(h.filters == StoreFilters::of(c.data)))
    return {Kind::kFilters, "it was filtered with " + h.filters.describe() +
                                ", the config asks for " + StoreFilters::of(c.data).describe()};
  if (vocabs != nullptr) {
    if (auto why = store.vocab_mismatch(*vocabs)) return {Kind::kVocabulary, *why};
  } else if (!h.trained || !(*h.trained == VocabTraining::of(c))) {
    return {Kind::kVocabulary, "its vocabulary was not trained with this config's vocab section"};
  }
  if (needs_text(c) && !store.has_text())
    return {Kind::kFilters, "it keeps no text, which subword sampling (data.src_sampling, "
                            "data.tgt_sampling) re-encodes"};
  for (const auto& input : h.inputs)
    for (const FileStamp* stamp : {&input.src, &input.tgt})
      if (auto change = file_change(*stamp)) return {Kind::kInputChanged, *change};
  return {};
}

}  // namespace nmt
