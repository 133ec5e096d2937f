#include "data/prepare.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

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
#include "util/util.h"

namespace nmt {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string absolute_path(const std::string& path) {
  return fs::absolute(path).lexically_normal().string();
}

json inputs_json(const Config& c) {
  json out = json::array();
  for (const auto& k : c.data.training.corpora)
    out.push_back({{"src", absolute_path(k.src)}, {"tgt", absolute_path(k.tgt)}});
  return out;
}

json filters_json(const DataConfig& d) {
  return {{"max_len", d.max_len}, {"max_len_ratio", d.max_len_ratio}, {"dedup", d.dedup}};
}

// The vocab keys a trained vocabulary depends on.
json vocab_training_json(const VocabConfig& v) {
  return {{"joint", v.joint},
          {"size", v.size},
          {"model_type", name_of(v.model_type)},
          {"character_coverage", v.character_coverage},
          {"input_sentence_size", v.input_sentence_size},
          {"src_model", v.src_model},
          {"tgt_model", v.tgt_model}};
}

bool usable_line(const std::string& line) {
  return is_valid_utf8(line) && line.find('\0') == std::string::npos && !trim(line).empty();
}

// Algorithm R over the lines offered: the first k in order while there are no more than k,
// then each line so far equally likely to be in the sample. Seeded: the same sample every time.
class Reservoir {
 public:
  explicit Reservoir(int64_t k) : k_(static_cast<size_t>(k)), rng_(0x6E6D7473616D706CULL) {}
  void offer(const std::string& line) {
    ++seen_;
    if (lines_.size() < k_) {
      lines_.push_back(line);
      return;
    }
    const uint64_t j = rng_.below(static_cast<uint64_t>(seen_));
    if (j < k_) lines_[j] = line;
  }
  int64_t seen() const { return seen_; }
  std::string text() const {
    size_t bytes = 0;
    for (const auto& l : lines_) bytes += l.size() + 1;
    std::string out;
    out.reserve(bytes);
    for (const auto& l : lines_) {
      out += l;
      out += '\n';
    }
    return out;
  }
  size_t size() const { return lines_.size(); }

 private:
  size_t k_;
  SplitMix64 rng_;
  std::vector<std::string> lines_;
  int64_t seen_ = 0;
};

SentencePiece train_one(const Config& c, const std::vector<std::string>& files,
                        const std::string& name, int threads) {
  Reservoir sample(c.vocab.input_sentence_size);
  std::string line;
  for (const auto& path : files) {
    LineReader reader(path);
    while (reader.next(line))
      if (usable_line(line)) sample.offer(line);
  }
  spdlog::info("training SentencePiece {} vocabulary of {} on {} of {} lines -> {}",
               name_of(c.vocab.model_type), c.vocab.size, sample.size(), sample.seen(), name);
  SpmTrainOptions o;
  o.vocab_size = c.vocab.size;
  o.model_type = name_of(c.vocab.model_type);
  o.character_coverage = c.vocab.character_coverage;
  o.input_sentence_size = c.vocab.input_sentence_size;
  o.threads = threads;
  return SentencePiece::train(sample.text(), o);
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
  Encoders(const Vocabs& vocabs, bool hash, int threads) : vocabs_(vocabs), hash_(hash) {
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
      if (!is_valid_utf8(a) || !is_valid_utf8(b) || a.find('\0') != std::string::npos ||
          b.find('\0') != std::string::npos) {
        c.invalid[i] = 1;
        continue;
      }
      c.x[i] = vocabs_.src.encode(a);
      c.y[i] = vocabs_.tgt.encode(b);
      if (hash_) {
        Hash64 h;
        h.update(a);
        h.update(std::string_view("\0", 1));
        h.update(b);
        c.hash[i] = h.digest();
      }
    }
  }

  const Vocabs& vocabs_;
  const bool hash_;
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

// The store's three data files, written pair after pair.
class StoreWriter {
 public:
  StoreWriter(const std::string& dir, int bytes_per_id)
      : bytes_per_id_(bytes_per_id),
        tokens_(dir + "/tokens.bin", OutFile::Mode::kTruncate),
        offsets_(dir + "/offsets.bin", OutFile::Mode::kTruncate),
        lengths_(dir + "/lengths.bin", OutFile::Mode::kTruncate) {}
  void add(const std::vector<int>& x, const std::vector<int>& y) {
    const uint64_t offset = src_ids_ + tgt_ids_;
    offsets_.write({reinterpret_cast<const char*>(&offset), sizeof offset});
    const uint16_t lens[2] = {static_cast<uint16_t>(x.size()), static_cast<uint16_t>(y.size())};
    lengths_.write({reinterpret_cast<const char*>(lens), sizeof lens});
    write_ids(x);
    write_ids(y);
    src_ids_ += x.size();
    tgt_ids_ += y.size();
    ++pairs_;
  }
  void finish() {
    for (OutFile* f : {&tokens_, &offsets_, &lengths_}) {
      f->sync();
      f->close();
    }
  }
  int64_t pairs() const { return pairs_; }
  uint64_t src_ids() const { return src_ids_; }
  uint64_t tgt_ids() const { return tgt_ids_; }

 private:
  void write_ids(const std::vector<int>& ids) {
    if (bytes_per_id_ == 2) {
      narrow_.assign(ids.begin(), ids.end());
      tokens_.write({reinterpret_cast<const char*>(narrow_.data()), 2 * narrow_.size()});
    } else {
      tokens_.write({reinterpret_cast<const char*>(ids.data()), 4 * ids.size()});
    }
  }
  int bytes_per_id_;
  OutFile tokens_, offsets_, lengths_;
  std::vector<uint16_t> narrow_;
  int64_t pairs_ = 0;
  uint64_t src_ids_ = 0, tgt_ids_ = 0;
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
  int64_t max_len;
  double max_len_ratio;
  bool dedup;
  HashSet seen;

  void apply(const Chunk& c, StoreWriter& out, CorpusStats& s) {
    for (size_t i = 0; i < c.src.size(); ++i) {
      ++s.total;
      if (c.invalid[i] != 0) {
        ++s.invalid_utf8;
        continue;
      }
      const auto nx = static_cast<int64_t>(c.x[i].size()), ny = static_cast<int64_t>(c.y[i].size());
      if (nx == 0 || ny == 0) {
        ++s.empty;
        continue;
      }
      if (nx > max_len || ny > max_len) {
        ++s.too_long;
        continue;
      }
      if (max_len_ratio > 0 &&
          static_cast<double>(std::max(nx, ny)) > max_len_ratio * static_cast<double>(std::min(nx, ny))) {
        ++s.ratio;
        continue;
      }
      if (dedup && !seen.insert(c.hash[i])) {
        ++s.duplicate;
        continue;
      }
      out.add(c.x[i], c.y[i]);
      ++s.kept;
    }
  }
};

// Encodes one corpus into `out`; returns its header entry.
json encode_corpus_file(const CorpusConfig& corpus, const Vocabs& vocabs, Filters& filters,
                        int threads, StoreWriter& out, CorpusStats& total) {
  const int64_t begin = out.pairs();
  FileStamp src_stamp = stat_file(absolute_path(corpus.src));
  FileStamp tgt_stamp = stat_file(absolute_path(corpus.tgt));
  LineReader src(corpus.src), tgt(corpus.tgt);
  CorpusStats s;
  {
    Encoders encoders(vocabs, filters.dedup, threads);
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
  return {{"src", src_stamp.to_json()},
          {"tgt", tgt_stamp.to_json()},
          {"pairs", {begin, out.pairs()}},
          {"counts", stats_to_json(s)}};
}

}  // namespace

Vocabs train_vocabs(const Config& c, int threads) {
  const auto& corpora = c.data.training.corpora;
  std::vector<std::string> src, tgt, both;
  for (const auto& k : corpora) {
    src.push_back(k.src);
    tgt.push_back(k.tgt);
    both.push_back(k.src);
    both.push_back(k.tgt);
  }
  if (c.vocab.joint) {
    auto sp = c.vocab.model.empty() ? train_one(c, both, "spm.model", threads)
                                    : SentencePiece::from_file(c.vocab.model);
    return Vocabs{sp, sp, true};
  }
  // Each side from its file when the config names one, else trained.
  return Vocabs{c.vocab.src_model.empty() ? train_one(c, src, "spm.src.model", threads)
                                          : SentencePiece::from_file(c.vocab.src_model),
                c.vocab.tgt_model.empty() ? train_one(c, tgt, "spm.tgt.model", threads)
                                          : SentencePiece::from_file(c.vocab.tgt_model),
                false};
}

void prepare_store(const Config& c, const Vocabs* given, const std::string& dir, int threads) {
  const auto start = std::chrono::steady_clock::now();
  const std::string tmp = dir + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    create_directories(tmp);
    // The vocabulary on train.threads, not `threads`: SentencePiece's training differs with
    // its thread count, and the store's bytes must not depend on the encoding threads.
    const Vocabs vocabs = given != nullptr ? *given : train_vocabs(c, effective_threads(c));
    const int bytes_per_id = std::max(vocabs.src.size(), vocabs.tgt.size()) <= 65536 ? 2 : 4;
    StoreWriter out(tmp, bytes_per_id);
    Filters filters{c.data.max_len, c.data.max_len_ratio, c.data.dedup, {}};
    CorpusStats total;
    json inputs = json::array();
    for (const auto& corpus : c.data.training.corpora)
      inputs.push_back(encode_corpus_file(corpus, vocabs, filters, threads, out, total));
    out.finish();
    if (out.pairs() == 0)
      throw Error("no training pairs left after filtering " + c.data.training.corpora[0].src);
    write_vocabs(tmp, vocabs);
    const json header = {
        {"format", "nmt token store"},
        {"version", kStoreVersion},
        {"pairs", out.pairs()},
        {"tokens", {{"src", out.src_ids()}, {"tgt", out.tgt_ids()}, {"bytes_per_id", bytes_per_id}}},
        {"vocab",
         {{"joint", vocabs.joint},
          {"src", vocab_hash(vocabs.src)},
          {"tgt", vocab_hash(vocabs.tgt)},
          {"trained", given != nullptr ? json(nullptr) : vocab_training_json(c.vocab)}}},
        {"filters", filters_json(c.data)},
        {"inputs", inputs},
        {"counts", stats_to_json(total)}};
    write_file_synced(tmp + "/header.json", header.dump(2) + "\n");
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

std::string store_key(const Config& c) {
  const json vocab = json::parse(config_to_json(Config{{}, c.vocab, {}, {}, {}})).at("vocab");
  const json recipe = {{"inputs", inputs_json(c)}, {"filters", filters_json(c.data)},
                       {"vocab", vocab}};
  return hex64(hash64(recipe.dump()));
}

std::string store_mismatch(const TokenStore& store, const Config& c, const Vocabs* vocabs) {
  const json& h = store.header();
  const json& inputs = h.at("inputs");
  const json want = inputs_json(c);
  if (inputs.size() != want.size())
    return "it holds " + std::to_string(inputs.size()) + " corpora, the config names " +
           std::to_string(want.size());
  for (size_t i = 0; i < want.size(); ++i)
    for (const char* side : {"src", "tgt"})
      if (inputs[i].at(side).at("path") != want[i].at(side))
        return "it was made from " + inputs[i][side]["path"].get<std::string>() + ", not " +
               want[i][side].get<std::string>();
  if (h.at("filters") != filters_json(c.data))
    return "it was filtered with " + h["filters"].dump() + ", the config asks for " +
           filters_json(c.data).dump();
  if (vocabs != nullptr) {
    if (auto why = store.vocab_mismatch(*vocabs); !why.empty()) return why;
  } else if (h.at("vocab").at("trained") != vocab_training_json(c.vocab)) {
    return "its vocabulary was not trained with this config's vocab section";
  }
  for (const auto& input : inputs)
    for (const char* side : {"src", "tgt"})
      if (auto change = file_change(FileStamp::from_json(input.at(side))); !change.empty())
        return change;
  return "";
}

}  // namespace nmt
