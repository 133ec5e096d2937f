// The token store (data/store.h, data/prepare.h): filters and their counts, gzip, the bytes at
// any thread count, refusals of damaged or foreign stores, the batch plan against the sort it
// replaced, corpus weights, and training from text and from a store giving the same run.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "config/config.h"
#include "config/parse.h"
#include "data/batching.h"
#include "data/prepare.h"
#include "data/vocab_sample.h"
#include "data/store.h"
#include "helpers.h"
#include "util/util.h"

using namespace nmt;
using nlohmann::json;
using nmt_test::nmt_bin;
using nmt_test::read_text;
using nmt_test::run_command;
using nmt_test::write_text;
namespace fs = std::filesystem;

using nmt_test::config_for;
using nmt_test::error_of;

namespace {

// A tiny joint vocabulary, trained once for the suite.
const Vocabs& tiny_vocabs() {
  static const Vocabs v = [] {
    std::string text;
    const char* words[] = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
    for (int i = 0; i < 400; ++i)
      text += std::string(words[i % 9]) + " hundred " + words[(i * 7) % 9] + "\n";
    SpmTrainOptions o;
    o.vocab_size = 40;
    auto sp = SentencePiece::train(text, o);
    return Vocabs{sp, sp, true};
  }();
  return v;
}

// Pair i of a store as text (source, target).
std::pair<std::string, std::string> pair_text(const TokenStore& s, int64_t i) {
  std::vector<int64_t> x, y;
  s.append_src(i, x);
  s.append_tgt(i, y);
  return {tiny_vocabs().src.decode(std::vector<int>(x.begin(), x.end())),
          tiny_vocabs().tgt.decode(std::vector<int>(y.begin(), y.end()))};
}

// The batch plan as it was made before the store (a comparator sort over all pairs): the plan
// must not change, or training would.
std::vector<std::vector<int64_t>> reference_plan(const std::vector<int64_t>& src,
                                                 const std::vector<int64_t>& tgt, int64_t budget,
                                                 uint64_t seed) {
  const size_t n = src.size();
  SplitMix64 rng(seed);
  std::vector<uint64_t> tie(n);
  for (auto& t : tie) t = rng.next();
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const int64_t wa = pair_width(src[a], tgt[a]), wb = pair_width(src[b], tgt[b]);
    if (wa != wb) return wa < wb;
    if (src[a] != src[b]) return src[a] < src[b];
    if (tgt[a] != tgt[b]) return tgt[a] < tgt[b];
    return tie[a] < tie[b];
  });
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> current;
  int64_t width = 0;
  for (const int64_t i : order) {
    const int64_t w = std::max(width, pair_width(src[i], tgt[i]));
    if (!current.empty() && w * static_cast<int64_t>(current.size() + 1) > budget) {
      batches.push_back(std::move(current));
      current.clear();
      width = 0;
    }
    current.push_back(i);
    width = std::max(width, pair_width(src[i], tgt[i]));
  }
  if (!current.empty()) batches.push_back(std::move(current));
  for (size_t k = batches.size(); k > 1; --k) std::swap(batches[k - 1], batches[rng.below(k)]);
  return batches;
}

std::string make_data(const nmt_test::TempDir& dir, const std::string& name, int train) {
  const std::string data = dir / name;
  const auto r = run_command("python3 scripts/make_quickstart_data.py --out " + data +
                             " --train " + std::to_string(train) + " --valid 5 --test 5");
  EXPECT_EQ(r.status, 0) << r.output;
  return data;
}

// A small Transformer on quickstart-style data, as the resume tests train it.
std::string train_command(const std::string& run, const std::string& data_keys, int steps) {
  return nmt_bin() + " train --config configs/quickstart.json --run-dir " + run +
         " --set model.d_model=32 --set model.d_ff=64 --set model.heads=2"
         " --set model.dropout=0.1 --set data.valid_src= --set data.valid_tgt="
         " --set vocab.size=80 --set train.threads=1 --set train.batch_tokens=500"
         " --set train.warmup_steps=10 --set train.log_every=1 --set train.save_every=100"
         " --set train.max_steps=" +
         std::to_string(steps) + " " + data_keys;
}

std::string losses(const std::string& metrics) {
  std::string out;
  for (const auto& line : nmt_test::read_lines_of(metrics)) {
    const auto j = json::parse(line);
    if (j.contains("loss")) out += j["loss"].dump() + " ";
  }
  return out;
}

}  // namespace

TEST(Store, FiltersAndCountsEveryDroppedPair) {
  nmt_test::TempDir dir;
  const auto& sp = tiny_vocabs().src;
  // 1 kept, 2 empty, 3 invalid UTF-8, 4 too long, 5 kept, 6 a duplicate of 1, 7 too unequal.
  write_text(dir / "s",
             "one hundred two\n\nsix\xFF\none hundred two one hundred two one hundred two five\r\n"
             "nine\none hundred two\nseven\n");
  write_text(dir / "t",
             "two hundred one\nthree\nseven\neight\r\nfour\ntwo hundred one\n"
             "seven hundred seven hundred seven\n");
  const int64_t max_len =
      static_cast<int64_t>(sp.encode("seven hundred seven hundred seven").size());
  ASSERT_GT(static_cast<int64_t>(
                sp.encode("one hundred two one hundred two one hundred two five").size()),
            max_len);
  const auto c = config_for(dir / "s", dir / "t",
                            {"data.max_len=" + std::to_string(max_len), "data.dedup=true",
                             "data.max_len_ratio=2.5"});
  ASSERT_GT(static_cast<double>(sp.encode("seven hundred seven hundred seven").size()),
            2.5 * static_cast<double>(sp.encode("seven").size()));
  prepare_store(c, &tiny_vocabs(), dir / "store", 2);
  const auto s = TokenStore::open(dir / "store");
  const auto stats = s->stats();
  EXPECT_EQ(stats.total, 7);
  EXPECT_EQ(stats.kept, 2);
  EXPECT_EQ(stats.empty, 1);
  EXPECT_EQ(stats.invalid_utf8, 1);
  EXPECT_EQ(stats.too_long, 1);
  EXPECT_EQ(stats.duplicate, 1);
  EXPECT_EQ(stats.ratio, 1);
  ASSERT_EQ(s->size(), 2);
  EXPECT_EQ(pair_text(*s, 0), std::make_pair(std::string("one hundred two"),
                                             std::string("two hundred one")));
  EXPECT_EQ(pair_text(*s, 1).second, "four");
  EXPECT_EQ(s->header().bytes_per_id, 2);
  // Off by default: the duplicate and the unequal pair are kept.
  prepare_store(config_for(dir / "s", dir / "t", {"data.max_len=" + std::to_string(max_len)}),
                &tiny_vocabs(), dir / "plain", 1);
  EXPECT_EQ(TokenStore::open(dir / "plain")->size(), 4);  // 1, 5, 6 and 7
}

TEST(Store, LineCountsThatDifferAreRefusedNamingBoth) {
  nmt_test::TempDir dir;
  write_text(dir / "s", "one\ntwo\nthree\n");
  write_text(dir / "t", "one\ntwo");
  const auto e = error_of([&] { prepare_store(config_for(dir / "s", dir / "t"), &tiny_vocabs(), dir / "st", 1); });
  EXPECT_EQ(e, "line counts differ: " + (dir / "s") + " has 3 lines, " + (dir / "t") + " has 2");
  EXPECT_FALSE(fs::exists(dir / "st"));
}

TEST(Store, GzipInputsGiveTheSameStoreAndDamageIsNamed) {
  nmt_test::TempDir dir;
  std::string s, t;
  for (int i = 0; i < 3000; ++i) {
    s += "one hundred " + std::to_string(i % 7) + " two\n";
    t += "nine hundred " + std::to_string(i % 5) + "\n";
  }
  write_text(dir / "s", s);
  write_text(dir / "t", t);
  ASSERT_EQ(run_command("gzip -c " + (dir / "s") + " > " + (dir / "s.gz") + " && gzip -c " +
                        (dir / "t") + " > " + (dir / "t.txt"))
                .status,
            0);  // t.txt: gzip under a name without .gz, found by its magic bytes
  prepare_store(config_for(dir / "s", dir / "t"), &tiny_vocabs(), dir / "plain", 1);
  prepare_store(config_for(dir / "s.gz", dir / "t.txt"), &tiny_vocabs(), dir / "gz", 2);
  for (const char* f : {"tokens.bin", "offsets.bin", "lengths.bin"})
    EXPECT_TRUE(read_text(dir / "plain/" + f) == read_text(dir / "gz/" + f)) << f;
  const std::string gz = read_text(dir / "s.gz");
  write_text(dir / "cut.gz", gz.substr(0, gz.size() / 2));
  auto e = error_of([&] { prepare_store(config_for(dir / "cut.gz", dir / "t"), &tiny_vocabs(), dir / "x", 1); });
  EXPECT_NE(e.find(dir / "cut.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot read past line "), std::string::npos) << e;
  std::string bad = gz;
  for (size_t i = gz.size() / 3; i < gz.size() / 3 + 64; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x55);
  write_text(dir / "bad.gz", bad);
  e = error_of([&] { prepare_store(config_for(dir / "bad.gz", dir / "t"), &tiny_vocabs(), dir / "x", 1); });
  EXPECT_NE(e.find(dir / "bad.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot read past line "), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir / "x"));
}

TEST(Store, BytesDoNotDependOnTheThreads) {
  nmt_test::TempDir dir;
  std::string s, t;
  std::mt19937 rng(3);
  const char* words[] = {"one", "two", "three", "four", "five", "six", "seven", "hundred"};
  for (int i = 0; i < 20000; ++i) {
    for (int k = rng() % 9; k >= 0; --k) s += std::string(words[rng() % 8]) + " ";
    s += "\n";
    for (int k = rng() % 9; k >= 0; --k) t += std::string(words[rng() % 8]) + " ";
    t += "\n";
  }
  write_text(dir / "s", s);
  write_text(dir / "t", t);
  const auto c = config_for(dir / "s", dir / "t", {"data.dedup=true", "data.max_len=12"});
  for (const int threads : {1, 2, 3}) prepare_store(c, &tiny_vocabs(), dir / ("t" + std::to_string(threads)), threads);
  for (const char* f : {"header.json", "tokens.bin", "offsets.bin", "lengths.bin", "spm.model"}) {
    EXPECT_TRUE(read_text(dir / "t1/" + f) == read_text(dir / "t2/" + f)) << f;
    EXPECT_TRUE(read_text(dir / "t1/" + f) == read_text(dir / "t3/" + f)) << f;
  }
  EXPECT_GT(TokenStore::open(dir / "t1")->size(), 5000);
}

TEST(Store, DamagedOldOrForeignStoresAreRefusedWithTheReason) {
  nmt_test::TempDir dir;
  write_text(dir / "s", "one hundred two\nthree hundred four\n");
  write_text(dir / "t", "two hundred one\nfour hundred three\n");
  const auto c = config_for(dir / "s", dir / "t");
  prepare_store(c, &tiny_vocabs(), dir / "good", 1);
  auto copy = [&](const std::string& name) {
    fs::copy(dir / "good", dir / name, fs::copy_options::recursive);
    return dir / name;
  };
  auto header = json::parse(read_text(dir / "good/header.json"));
  header["version"] = 0;
  write_text(copy("old") + "/header.json", header.dump());
  EXPECT_NE(error_of([&] { TokenStore::open(dir / "old"); }).find("format version 0"),
            std::string::npos);
  const std::string tokens = read_text(dir / "good/tokens.bin");
  write_text(copy("cut") + "/tokens.bin", tokens.substr(0, tokens.size() - 2));
  EXPECT_NE(error_of([&] { TokenStore::open(dir / "cut"); }).find("incomplete or damaged"),
            std::string::npos);
  fs::remove(copy("headless") + "/header.json");  // a prepare killed before its end
  EXPECT_NE(error_of([&] { TokenStore::open(dir / "headless"); }).find("no header.json"),
            std::string::npos);
  // Another vocabulary.
  SpmTrainOptions o;
  o.vocab_size = 30;
  auto other = SentencePiece::train("alpha beta gamma delta\nbeta gamma delta alpha\n", o);
  const Vocabs others{other, other, true};
  const auto store = TokenStore::open(dir / "good");
  EXPECT_NE(store->vocab_mismatch(others).value_or("").find("another vocabulary"),
            std::string::npos);
  const StoreMismatch vocab = store_mismatch(*store, c, &others);
  EXPECT_EQ(vocab.kind, StoreMismatch::Kind::kVocabulary);
  EXPECT_NE(vocab.why.find("another vocabulary"), std::string::npos);
  EXPECT_FALSE(store_mismatch(*store, c, &tiny_vocabs()));
  EXPECT_EQ(store_mismatch(*store, config_for(dir / "s", dir / "t", {"data.dedup=true"}),
                           &tiny_vocabs()).kind,
            StoreMismatch::Kind::kFilters);
  EXPECT_EQ(store_mismatch(*store, config_for(dir / "t", dir / "s"), &tiny_vocabs()).kind,
            StoreMismatch::Kind::kCorpora);
  // An input that changed since.
  write_text(dir / "t", "two hundred one\nfour hundred six\n");
  const StoreMismatch changed = store_mismatch(*store, c, &tiny_vocabs());
  EXPECT_EQ(changed.kind, StoreMismatch::Kind::kInputChanged);
  EXPECT_NE(changed.why.find(" changed"), std::string::npos);
}

// A store whose bytes changed after it was written: ids out of the vocabulary, ids inside it
// (same size), a cut or grown index. Each is refused naming the file, before any pair is read.
TEST(Store, DamagedBytesAreRefusedNamingTheFile) {
  nmt_test::TempDir dir;
  std::string s, t;
  for (int i = 0; i < 200; ++i) {
    s += "one hundred " + std::to_string(i % 7) + " two\n";
    t += "nine hundred " + std::to_string(i % 5) + "\n";
  }
  write_text(dir / "s", s);
  write_text(dir / "t", t);
  prepare_store(config_for(dir / "s", dir / "t"), &tiny_vocabs(), dir / "good", 1);
  const auto good = TokenStore::open(dir / "good");
  EXPECT_EQ(good->header().version, kStoreVersion);
  EXPECT_EQ(good->header().checksums.size(), 3u);
  EXPECT_EQ(good->header().src_vocab_size, tiny_vocabs().src.size());
  auto damaged = [&](const std::string& name, const std::string& file, size_t at,
                     const std::string& bytes) {
    fs::copy(dir / "good", dir / name, fs::copy_options::recursive);
    std::string content = read_text(dir / (name + "/" + file));
    content.replace(at, bytes.size(), bytes);
    write_text(dir / (name + "/" + file), content);
    return error_of([&] { TokenStore::open(dir / name); });
  };
  const std::string tokens = read_text(dir / "good/tokens.bin"),
                    offsets = read_text(dir / "good/offsets.bin");
  // Another id inside the vocabulary, and an index entry one off.
  const std::string high("\xFF\xFF", 2), low(1, static_cast<char>(tokens[100] == 5 ? 6 : 5)),
      index(1, static_cast<char>(offsets[8] + 1));
  std::string e = damaged("high", "tokens.bin", 100, high);
  EXPECT_NE(e.find(dir / "high/tokens.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("checksum"), std::string::npos) << e;
  e = damaged("low", "tokens.bin", 100, low);
  EXPECT_NE(e.find(dir / "low/tokens.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("checksum"), std::string::npos) << e;
  e = damaged("index", "offsets.bin", 8, index);
  EXPECT_NE(e.find(dir / "index/offsets.bin"), std::string::npos) << e;
  // Without checksums (a version 1 header): out-of-vocabulary ids and a broken index are still
  // found, by the id range and the lengths.
  auto v1 = [&](const std::string& name) {
    auto h = json::parse(read_text(dir / (name + "/header.json")));
    h["version"] = 1;
    h.erase("checksums");
    h["vocab"].erase("src_size");
    h["vocab"].erase("tgt_size");
    write_text(dir / (name + "/header.json"), h.dump(2));
    return error_of([&] { TokenStore::open(dir / name); });
  };
  e = v1("high");
  EXPECT_NE(e.find(dir / "high/tokens.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("holds id 65535"), std::string::npos) << e;
  EXPECT_NE(e.find("outside the vocabulary of " + std::to_string(tiny_vocabs().src.size())),
            std::string::npos) << e;
  e = v1("index");
  EXPECT_NE(e.find(dir / "index/offsets.bin"), std::string::npos) << e;
  // From the command line: one line, exit 1, no backtrace.
  auto r = run_command(nmt_bin() + " train --config configs/quickstart.json --run-dir " +
                       (dir / "run") + " --set data.train_store=" + (dir / "low") +
                       " --set train.max_steps=1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("nmt: error: token store " + (dir / "low/tokens.bin") + " is damaged"),
            std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("frame #"), std::string::npos) << r.output;
}

// A store written by the previous format (version 1, as nmt wrote it before checksums) opens
// and reads the same pairs.
TEST(Store, VersionOneStoresStillOpen) {
  const std::string fixture = nmt_test::source_dir() + "/tests/fixtures/store_v1";
  const auto store = TokenStore::open(fixture);
  EXPECT_EQ(store->header().version, 1);
  EXPECT_TRUE(store->header().checksums.empty());
  ASSERT_EQ(store->size(), 3);
  const Vocabs v = store->vocabs();
  std::vector<int64_t> x;
  store->append_src(1, x);
  EXPECT_EQ(v.src.decode(std::vector<int>(x.begin(), x.end())), "three hundred four");
  EXPECT_EQ(store->stats().total, 4);
  EXPECT_EQ(store->header().inputs.size(), 1u);
}

// A prepare killed with SIGKILL leaves DIR.tmp-PID; the next prepare of DIR removes it (and the
// directories of prepares that still run, or that hold other files, stay).
TEST(Store, StaleTemporaryDirectoriesAreRemoved) {
  nmt_test::TempDir dir;
  write_text(dir / "s", "one hundred two\nthree hundred four\n");
  write_text(dir / "t", "two hundred one\nfour hundred three\n");
  // A process that has ended: its id is free (the kernel does not hand it out again at once).
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  const std::string stale = dir / ("store.tmp-" + std::to_string(gone));
  fs::create_directories(stale);
  write_text(stale + "/tokens.bin", "partial");
  const std::string running = dir / ("store.tmp-" + std::to_string(::getppid()));
  fs::create_directories(running);
  const std::string foreign = dir / ("store.tmp-" + std::to_string(gone + 1000000));
  fs::create_directories(foreign);
  write_text(foreign + "/notes.txt", "mine");
  prepare_store(config_for(dir / "s", dir / "t"), &tiny_vocabs(), dir / "store", 1);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(running));
  EXPECT_TRUE(fs::exists(foreign));
  EXPECT_NO_THROW(TokenStore::open(dir / "store"));
}

TEST(BatchPlan, EqualsTheSortItReplaced) {
  std::mt19937 rng(11);
  for (const int n : {0, 1, 7, 500, 20000}) {
    std::vector<int64_t> src(n), tgt(n);
    for (int i = 0; i < n; ++i) {
      src[i] = 1 + rng() % 60;
      tgt[i] = 1 + rng() % (i % 3 == 0 ? 5 : 70);
    }
    for (const uint64_t seed : {0ULL, 1ULL, 0xFFFFFFFFFFFFFFFFULL})
      for (const int64_t budget : {80, 3000})
        EXPECT_EQ(make_batches(src, tgt, budget, seed), reference_plan(src, tgt, budget, seed))
            << n << " pairs, seed " << seed << ", budget " << budget;
  }
}

TEST(BatchPlan, WeightedCorporaTakeTheirShareAndRepeatExactly) {
  const std::vector<CorpusRange> corpora = {{0, 1000, 2.0}, {1000, 1300, 0.5}, {1300, 1400, 0.0},
                                            {1400, 1450, 1.25}};
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto items = epoch_items(corpora, 7, epoch);
    std::map<int, int64_t> per_corpus;
    std::map<uint32_t, int> times;
    for (const uint32_t p : items) {
      ++per_corpus[p < 1000 ? 0 : p < 1300 ? 1 : p < 1400 ? 2 : 3];
      ++times[p];
    }
    EXPECT_EQ(per_corpus[0], 2000);
    EXPECT_EQ(per_corpus[1], 150);
    EXPECT_EQ(per_corpus[2], 0);
    EXPECT_EQ(per_corpus[3], 50 + 13);
    for (const auto& [p, k] : times) EXPECT_LE(k, p < 1000 ? 2 : p < 1300 ? 1 : 2) << p;
    EXPECT_EQ(items, epoch_items(corpora, 7, epoch));  // the same from the same seed
  }
  EXPECT_NE(epoch_items(corpora, 7, 0), epoch_items(corpora, 7, 1));
  EXPECT_TRUE(epoch_items({{0, 10, 1.0}, {10, 20, 1.0}}, 7, 0).empty());  // all once, in order
  // A stream that seeks to a position continues as the one that walked there.
  std::vector<uint16_t> lengths(2 * 1450);
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = static_cast<uint16_t>(1 + i * 7 % 30);
  BatchStream walked(lengths.data(), 1450, corpora, 200, 5);
  walked.seek(0, 0);
  for (int k = 0; k < 700; ++k) {
    walked.roll_over();
    walked.take();
  }
  BatchStream sought(lengths.data(), 1450, corpora, 200, 5);
  sought.seek(walked.epoch(), walked.position());
  for (int k = 0; k < 50; ++k) {
    walked.roll_over();
    sought.roll_over();
    EXPECT_EQ(walked.take(), sought.take());
  }
}

// Text and the store of that text train the same run, bit for bit, in one process and in two;
// the store prepared by the run is reused by --resume.
TEST(Store, TextAndStoreTrainTheSameRun) {
  nmt_test::TempDir dir;
  const std::string data = make_data(dir, "data", 400);
  const std::string text_keys =
      "--set data.train_src=" + data + "/train.en --set data.train_tgt=" + data + "/train.de";
  auto r = run_command(nmt_bin() + " prepare --config configs/quickstart.json --out " +
                       (dir / "store") + " --threads 2 --set vocab.size=80 --set train.threads=1 " + text_keys);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const std::string nproc : {"", " --nproc 2"}) {
    const std::string a = dir / ("text" + std::to_string(nproc.size())),
                      b = dir / ("from-store" + std::to_string(nproc.size()));
    r = run_command(train_command(a, text_keys, 12) + nproc);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("token store " + a + "/store: preparing"), std::string::npos) << r.output;
    r = run_command(train_command(b, "--set data.train_store=" + (dir / "store"), 12) + nproc);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(losses(a + "/metrics.jsonl"), losses(b + "/metrics.jsonl")) << nproc;
    EXPECT_FALSE(losses(a + "/metrics.jsonl").empty());
    EXPECT_TRUE(read_text(a + "/checkpoints/ckpt-00000012/model.pt") ==
                read_text(b + "/checkpoints/ckpt-00000012/model.pt"))
        << nproc;
    EXPECT_TRUE(read_text(a + "/spm.model") == read_text(b + "/spm.model")) << nproc;
  }
  const std::string a = dir / "text0";
  r = run_command(train_command(a, text_keys, 14) + " --resume");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("token store " + a + "/store: reused"), std::string::npos) << r.output;
  // An input changed under a checkpoint: refused unless a fresh pass over the data is asked for.
  run_command("sed -i '1s/.*/changed/' " + data + "/train.de");
  r = run_command(train_command(a, text_keys, 16) + " --resume");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("train.de changed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--reset-data"), std::string::npos) << r.output;
  r = run_command(train_command(a, text_keys, 16) + " --resume --reset-data");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("token store " + a + "/store: preparing (" + data + "/train.de changed"),
            std::string::npos)
      << r.output;
  // A store made with another vocabulary is refused by name.
  r = run_command(nmt_bin() + " prepare --config configs/quickstart.json --out " + (dir / "other") +
                  " --set vocab.size=60 " + text_keys);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(train_command(dir / "foreign", "--set data.train_store=" + (dir / "store") +
                                                      " --set vocab.model=" + (dir / "other") +
                                                      "/spm.model",
                                12));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("another vocabulary"), std::string::npos) << r.output;
}

// Runs that name one data.cache_dir share the store: the second reuses what the first prepared.
TEST(Store, CacheDirIsSharedByRuns) {
  nmt_test::TempDir dir;
  const std::string data = make_data(dir, "data", 200);
  const std::string keys = "--set data.train_src=" + data + "/train.en --set data.train_tgt=" +
                           data + "/train.de --set data.cache_dir=" + (dir / "cache");
  auto r = run_command(train_command(dir / "a", keys, 2));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(": preparing"), std::string::npos) << r.output;
  r = run_command(train_command(dir / "b", keys, 2));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(": reused"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "b/store"));
  EXPECT_TRUE(read_text(dir / "a/spm.model") == read_text(dir / "b/spm.model"));
}

// Every I/O operation of nmt prepare, failed in turn: exit 1 with the reason, and no store (nor
// a part of one) where it was to be.
TEST(Store, EveryFailedWriteOfPrepareLeavesNoStore) {
  nmt_test::TempDir dir;
  const std::string data = make_data(dir, "data", 100);
  const std::string cmd = nmt_bin() + " prepare --config configs/quickstart.json --set vocab.size=60"
                          " --set data.train_src=" + data + "/train.en --set data.train_tgt=" +
                          data + "/train.de --out ";
  auto r = run_command("NMT_DEBUG_IO_TRACE=" + (dir / "trace") + " " + cmd + (dir / "ref"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto ops = nmt_test::read_lines_of(dir / "trace");
  ASSERT_GE(ops.size(), 10u);
  for (size_t n = 1; n <= ops.size(); ++n) {
    const std::string out = dir / ("out-" + std::to_string(n));
    r = run_command("NMT_DEBUG_FAIL_IO=" + std::to_string(n) + " " + cmd + out);
    EXPECT_EQ(r.status, 1) << ops[n - 1] << "\n" << r.output;
    EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << ops[n - 1] << "\n" << r.output;
    // No store, or (a failure after the rename: the directory's sync) a complete one.
    if (fs::exists(out)) EXPECT_NO_THROW(TokenStore::open(out)) << ops[n - 1];
    for (const auto& e : fs::directory_iterator(dir.path()))
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos)
          << ops[n - 1] << ": " << e.path();
  }
}

// A vocabulary sample that would not fit in memory is refused before SentencePiece starts,
// naming the key to lower; the estimate grows with the sample.
TEST(Store, VocabularyThatWouldNotFitIsRefusedNamingTheKey) {
  nmt_test::TempDir dir;
  const std::string data = make_data(dir, "data", 100);
  const std::string cmd = nmt_bin() + " prepare --vocab-only --config configs/quickstart.json"
                          " --set vocab.size=60 --set data.train_src=" + data +
                          "/train.en --set data.train_tgt=" + data + "/train.de --out ";
  auto r = run_command("NMT_DEBUG_MEMORY_AVAILABLE=1000000 " + cmd + (dir / "v1"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("lower vocab.input_sentence_size"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "v1/spm.model"));
  r = run_command(cmd + (dir / "v2"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_LT(vocab_training_memory(100000000, 500000), vocab_training_memory(200000000, 1000000));
  EXPECT_GT(vocab_training_memory(200000000, 1000000), int64_t{4} * 200000000);
}
