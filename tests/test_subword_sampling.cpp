// Subword regularization (data.src_sampling, data.tgt_sampling): SentencePiece draws keyed by a
// seed, the text a store keeps for them, the pairs segmented anew per epoch, and the config keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "config/parse.h"
#include "config/print.h"
#include "data/batching.h"
#include "data/prepare.h"
#include "data/subword_sampling.h"
#include "data/store.h"
#include "helpers.h"
#include "util/util.h"

using namespace nmt;
using nlohmann::json;
using nmt_test::read_text;
using nmt_test::write_text;
namespace fs = std::filesystem;

using nmt_test::config_for;
using nmt_test::error_of;

namespace {

std::string training_text() {
  std::string text;
  const char* words[] = {"seventeen", "thousand", "nineteen", "hundreds", "fourteen",
                         "sixty",     "eleven",   "twelve",   "eighteen"};
  for (int i = 0; i < 600; ++i)
    text += std::string(words[i % 9]) + " " + words[(i * 7) % 9] + " " + words[(i * 5) % 9] + "\n";
  return text;
}

// Tiny models of each type, trained once for the suite.
const SentencePiece& model_of(const std::string& type) {
  static std::map<std::string, SentencePiece> models;
  auto it = models.find(type);
  if (it == models.end()) {
    SpmTrainOptions o;
    o.vocab_size = type == "char" ? 30 : 60;
    o.model_type = type;
    it = models.emplace(type, SentencePiece::train(training_text(), o)).first;
  }
  return it->second;
}

const std::vector<std::string> kBothSides = {"data.src_sampling.enabled=true",
                                             "data.tgt_sampling.enabled=true"};

}  // namespace

TEST(SubwordSampling, ModelTypesAreReadFromTheModelBytes) {
  EXPECT_EQ(model_of("unigram").model_type(), SpmModelType::kUnigram);
  EXPECT_EQ(model_of("bpe").model_type(), SpmModelType::kBpe);
  EXPECT_EQ(model_of("char").model_type(), SpmModelType::kChar);
  EXPECT_EQ(spm_model_type(""), SpmModelType::kUnigram);  // nothing said: the proto default
  EXPECT_EQ(spm_model_type("\x12\x02\x18\x04"), SpmModelType::kChar);  // trainer_spec {type: 4}
  EXPECT_EQ(spm_model_type("\x12\x09garbage"), SpmModelType::kUnigram);  // cut short
}

// A draw is a function of its seed: the same seed gives the same pieces, other seeds other
// pieces, and every draw spells the sentence.
TEST(SubwordSampling, DrawsAreAFunctionOfTheSeedAndSpellTheSentence) {
  const std::string text = "seventeen hundreds nineteen fourteen";
  for (const std::string type : {"unigram", "bpe"}) {
    const SentencePiece& sp = model_of(type);
    const double alpha = type == "unigram" ? 0.1 : 0.3;
    const auto best = sp.encode(text);
    std::set<std::vector<int>> seen;
    for (uint64_t seed = 0; seed < 40; ++seed) {
      const auto a = sp.sample_encode(text, -1, alpha, seed);
      // Another draw between the two: the generator is reseeded, not continued.
      sp.sample_encode(text, -1, alpha, seed + 1000);
      EXPECT_EQ(sp.sample_encode(text, -1, alpha, seed), a) << type << " seed " << seed;
      EXPECT_EQ(sp.decode(a), text) << type;
      seen.insert(a);
    }
    EXPECT_GE(seen.size(), 5u) << type << ": 40 seeds gave " << seen.size() << " segmentations";
    // A large alpha (unigram) or no dropout (bpe) gives the best segmentation.
    EXPECT_EQ(sp.sample_encode(text, -1, type == "unigram" ? 100.0 : 0.0, 7), best) << type;
  }
  // Among the n best (unigram; alpha 0: alike): only those are drawn.
  const SentencePiece& sp = model_of("unigram");
  std::set<std::vector<int>> two;
  for (uint64_t seed = 0; seed < 40; ++seed) two.insert(sp.sample_encode(text, 2, 0.0, seed));
  EXPECT_EQ(two.size(), 2u);
  EXPECT_EQ(two.count(sp.encode(text)), 1u);
}

// A store keeps the pairs' text only when the config samples: without sampling its files,
// header and key are what they were; with it, text.bin holds each kept pair as it was encoded,
// is checksummed, and a store without text does not stand for a sampling config.
TEST(SubwordSampling, StoresKeepTextOnlyForSamplingAndChecksumIt) {
  nmt_test::TempDir dir;
  std::string s, t;
  for (int i = 0; i < 50; ++i) {
    s += (i == 7 ? "" : "seventeen eleven " + std::to_string(i)) + "\n";  // pair 7 is dropped
    t += "nineteen twelve " + std::to_string(i % 4) + "\n";
  }
  write_text(dir / "s", s);
  write_text(dir / "t", t);
  const SentencePiece& sp = model_of("unigram");
  const Vocabs vocabs{sp, sp, true};
  const Config off = config_for(dir / "s", dir / "t");
  const Config on = config_for(dir / "s", dir / "t", kBothSides);
  EXPECT_FALSE(needs_text(off));
  EXPECT_TRUE(needs_text(on));
  EXPECT_NE(store_key(off), store_key(on));
  EXPECT_EQ(store_key(off), store_key(config_for(dir / "s", dir / "t",
                                                 {"data.src_sampling.alpha=0.5"})));
  prepare_store(off, &vocabs, dir / "off", 1);
  prepare_store(on, &vocabs, dir / "on", 1);
  EXPECT_FALSE(fs::exists(dir / "off/text.bin"));
  const auto plain = TokenStore::open(dir / "off");
  const auto with_text = TokenStore::open(dir / "on");
  EXPECT_FALSE(plain->has_text());
  ASSERT_TRUE(with_text->has_text());
  EXPECT_EQ(plain->header().checksums.size(), 3u);
  EXPECT_EQ(with_text->header().checksums.size(), 5u);
  for (const char* file : {"tokens.bin", "offsets.bin", "lengths.bin"})
    EXPECT_EQ(read_text(dir / ("off/" + std::string(file))),
              read_text(dir / ("on/" + std::string(file))))
        << file;
  ASSERT_EQ(with_text->size(), 49);
  EXPECT_EQ(with_text->text(0, true), "seventeen eleven 0");
  EXPECT_EQ(with_text->text(7, true), "seventeen eleven 8");
  EXPECT_EQ(with_text->text(7, false), "nineteen twelve 0");
  EXPECT_EQ(with_text->text(48, false), "nineteen twelve 1");
  EXPECT_FALSE(store_mismatch(*with_text, off, &vocabs));
  const auto why = store_mismatch(*plain, on, &vocabs);
  EXPECT_EQ(why.kind, StoreMismatch::Kind::kFilters);
  EXPECT_NE(why.why.find("keeps no text"), std::string::npos) << why.why;

  // A damaged byte of the text or its index is found when the store opens.
  for (const std::string file : {"text.bin", "text_offsets.bin"}) {
    fs::copy(dir / "on", dir / ("bad-" + file), fs::copy_options::recursive);
    const std::string path = dir / ("bad-" + file + "/" + file);
    std::string bytes = read_text(path);
    bytes[9] = static_cast<char>(bytes[9] ^ 0x20);
    write_text(path, bytes);
    const std::string e = error_of([&] { TokenStore::open(dir / ("bad-" + file)); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find("checksum"), std::string::npos) << e;
  }
  fs::copy(dir / "on", dir / "short", fs::copy_options::recursive);
  fs::resize_file(dir / "short/text.bin", fs::file_size(dir / "short/text.bin") - 1);
  const std::string e = error_of([&] { TokenStore::open(dir / "short"); });
  EXPECT_NE(e.find("text.bin is incomplete or damaged"), std::string::npos) << e;
}

// The pairs as training reads them: each side drawn per (seed, epoch, pair), the same draw when
// asked again, another in another epoch or with another seed; a side without sampling is the
// store's ids; a tagged corpus keeps its tag; a draw over data.max_len falls back to the best.
TEST(SubwordSampling, PairsAreDrawnPerSeedEpochAndPair) {
  nmt_test::TempDir dir;
  std::string s, t;
  for (int i = 0; i < 40; ++i) {
    s += "seventeen hundreds nineteen fourteen sixty\n";
    t += "eighteen thousand eleven twelve\n";
  }
  write_text(dir / "s", s);
  write_text(dir / "t", t);
  const SentencePiece& sp = model_of("unigram");
  const Vocabs vocabs{sp, sp, true};
  Config c = config_for(dir / "s", dir / "t",
                        {"data.src_sampling.enabled=true", "data.src_sampling.alpha=0.1"});
  prepare_store(c, &vocabs, dir / "store", 1);
  const auto store = TokenStore::open(dir / "store");
  auto ids = [](const Pairs& p, int64_t i, bool src) {
    std::vector<int64_t> out = {99};  // appended after what is there
    src ? p.append_src(i, out) : p.append_tgt(i, out);
    EXPECT_EQ(out.front(), 99);
    return std::vector<int64_t>(out.begin() + 1, out.end());
  };
  auto spelled = [&](const std::vector<int64_t>& v) {
    return sp.decode(std::vector<int>(v.begin(), v.end()));
  };
  SampledPairs pairs(*store, vocabs, c.data, 1);
  SampledPairs again(*store, vocabs, c.data, 1);
  SampledPairs other_seed(*store, vocabs, c.data, 2);
  std::set<std::vector<int64_t>> drawn;
  int differ_by_epoch = 0, differ_by_seed = 0;
  for (int64_t i = 0; i < store->size(); ++i) {
    pairs.set_epoch(0);
    const auto a = ids(pairs, i, true);
    EXPECT_EQ(spelled(a), "seventeen hundreds nineteen fourteen sixty");
    again.set_epoch(3);  // another epoch first: nothing carries over
    ids(again, i, true);
    again.set_epoch(0);
    EXPECT_EQ(ids(again, i, true), a) << "pair " << i;
    pairs.set_epoch(1);
    differ_by_epoch += ids(pairs, i, true) != a;
    differ_by_seed += ids(other_seed, i, true) != a;
    drawn.insert(a);
    EXPECT_EQ(ids(pairs, i, false), ids(*store, i, false)) << "pair " << i;
  }
  EXPECT_GE(drawn.size(), 10u);
  EXPECT_GE(differ_by_epoch, 30);
  EXPECT_GE(differ_by_seed, 30);
  EXPECT_EQ(sampling_seed(1, 0, 5, true), sampling_seed(1, 0, 5, true));
  EXPECT_NE(sampling_seed(1, 0, 5, true), sampling_seed(1, 0, 5, false));

  // The epoch's lengths, as the plan reads them, are those of the draws a batch then reads, at
  // any number of threads.
  const uint16_t* lengths = pairs.epoch_lengths(1, 1);
  const std::vector<uint16_t> one_thread(lengths, lengths + 2 * store->size());
  lengths = pairs.epoch_lengths(1, 3);
  pairs.set_epoch(1);
  for (int64_t i = 0; i < store->size(); ++i) {
    EXPECT_EQ(lengths[2 * i], ids(pairs, i, true).size()) << "pair " << i;
    EXPECT_EQ(lengths[2 * i + 1], store->tgt_len(i)) << "pair " << i;
    EXPECT_EQ(lengths[2 * i], one_thread[2 * i]) << "pair " << i;
  }
  // Batches planned from them hold what they were planned to hold once drawn; planned from the
  // best segmentation's lengths, draws this noisy overflow the budget.
  auto widest_batch = [&](bool from_draws) {
    BatchStream stream(store->lengths(), store->size(), {{0, store->size(), 1.0}}, 60, 5);
    if (from_draws) stream.plan_with([&](int64_t e) { return pairs.epoch_lengths(e, 2); });
    stream.seek(1, 0);
    pairs.set_epoch(1);
    int64_t widest = 0;
    for (int64_t b = 0; b < stream.batches_per_epoch(); ++b) {
      const auto batch = stream.take();
      int64_t width = 0;
      for (const int64_t i : batch)
        width = std::max(width, pair_width(static_cast<int64_t>(ids(pairs, i, true).size()),
                                           static_cast<int64_t>(ids(pairs, i, false).size())));
      widest = std::max(widest, width * static_cast<int64_t>(batch.size()));
    }
    return widest;
  };
  EXPECT_LE(widest_batch(true), 60);
  EXPECT_GT(widest_batch(false), 60);

  // Draws longer than data.max_len give way to the best segmentation.
  const auto best_len = static_cast<int64_t>(sp.encode("seventeen hundreds nineteen fourteen sixty")
                                                 .size());
  c.data.max_len = best_len;
  SampledPairs capped(*store, vocabs, c.data, 1);
  int fell_back = 0;
  for (int64_t i = 0; i < store->size(); ++i) {
    const auto a = ids(capped, i, true);
    EXPECT_LE(static_cast<int64_t>(a.size()), best_len);
    fell_back += a == ids(*store, i, true);
  }
  EXPECT_GT(fell_back, 0);
  lengths = capped.epoch_lengths(0, 2);
  for (int64_t i = 0; i < store->size(); ++i)
    EXPECT_EQ(lengths[2 * i], ids(capped, i, true).size()) << "pair " << i;

  // A store without text, or a vocabulary with one segmentation a word, is refused by key.
  prepare_store(config_for(dir / "s", dir / "t"), &vocabs, dir / "plain", 1);
  const auto plain = TokenStore::open(dir / "plain");
  std::string e = error_of([&] { SampledPairs(*plain, vocabs, c.data, 1); });
  EXPECT_NE(e.find("data.src_sampling: the token store"), std::string::npos) << e;
  EXPECT_NE(e.find("keeps no text"), std::string::npos) << e;
  const Vocabs chars{model_of("char"), model_of("char"), true};
  e = error_of([&] { SampledPairs(*store, chars, c.data, 1); });
  EXPECT_NE(e.find("data.src_sampling.enabled: sampling needs a unigram or bpe vocabulary"),
            std::string::npos) << e;
}

TEST(SubwordSampling, TaggedSourcesKeepTheirTag) {
  nmt_test::TempDir dir;
  std::string s, t;
  for (int i = 0; i < 20; ++i) {
    s += "seventeen hundreds nineteen\n";
    t += "eighteen thousand\n";
  }
  write_text(dir / "s", s);
  write_text(dir / "t", t);
  SpmTrainOptions o;
  o.vocab_size = 60;
  o.user_symbols = {"<BT>"};
  const SentencePiece sp = SentencePiece::train(training_text(), o);
  const Vocabs vocabs{sp, sp, true};
  const Config c = parse_config(
      R"({"train": {"max_steps": 1}, "data": {"valid_src": "", "valid_tgt": "",
          "train": [{"src": ")" + (dir / "s") + R"(", "tgt": ")" + (dir / "t") + R"("},
                    {"src": ")" + (dir / "s") + R"(", "tgt": ")" + (dir / "t") + R"(",
                     "tag": "<BT>"}]}})",
      kBothSides);
  prepare_store(c, &vocabs, dir / "store", 1);
  const auto store = TokenStore::open(dir / "store");
  ASSERT_EQ(store->size(), 40);
  SampledPairs pairs(*store, vocabs, c.data, 1);
  const int tag = sp.piece_to_id("<BT>");
  for (int64_t i = 0; i < 40; ++i) {
    std::vector<int64_t> x;
    pairs.append_src(i, x);
    ASSERT_FALSE(x.empty());
    EXPECT_EQ(x.front() == tag, i >= 20) << "pair " << i;
    const std::vector<int> words(x.begin() + (i >= 20 ? 1 : 0), x.end());
    EXPECT_EQ(sp.decode(words), "seventeen hundreds nineteen");
  }
}

// The keys print back only when a side samples, so configs (and the checkpoints that carry
// them) without sampling keep their bytes; bad values name their path.
TEST(SubwordSampling, ConfigKeysPrintOnlyWhenOnAndRefuseBadValues) {
  const Config off = parse_config(R"({"train": {"max_steps": 1}})");
  const json printed = json::parse(config_to_json(off));
  EXPECT_FALSE(printed["data"].contains("src_sampling"));
  EXPECT_FALSE(printed["data"].contains("tgt_sampling"));
  const Config on = parse_config(
      R"({"train": {"max_steps": 1},
          "data": {"tgt_sampling": {"enabled": true, "alpha": 0.3, "nbest": 64}}})");
  EXPECT_TRUE(on.data.tgt_sampling.enabled);
  EXPECT_DOUBLE_EQ(on.data.tgt_sampling.alpha, 0.3);
  EXPECT_EQ(on.data.tgt_sampling.nbest, 64);
  const json again = json::parse(config_to_json(on));
  EXPECT_FALSE(again["data"].contains("src_sampling"));
  EXPECT_EQ(again["data"]["tgt_sampling"]["nbest"], 64);
  EXPECT_EQ(config_to_json(parse_config(config_to_json(on))), config_to_json(on));

  auto refused = [](const std::string& data, const std::string& vocab = "{}") {
    return error_of([&] {
      parse_config(R"({"train": {"max_steps": 1}, "vocab": )" + vocab + R"(, "data": )" + data +
                   "}");
    });
  };
  std::string e = refused(R"({"src_sampling": {"enabled": true, "nbest": 0}})");
  EXPECT_NE(e.find("data.src_sampling.nbest"), std::string::npos) << e;
  EXPECT_NE(e.find("-1 (all segmentations) or in [2, 512]"), std::string::npos) << e;
  e = refused(R"({"src_sampling": {"dropout": 1.0}})");
  EXPECT_NE(e.find("data.src_sampling.dropout"), std::string::npos) << e;
  e = refused(R"({"tgt_sampling": {"alpha": -0.1}})");
  EXPECT_NE(e.find("data.tgt_sampling.alpha"), std::string::npos) << e;
  e = refused(R"({"tgt_sampling": {"enabeld": true}})");
  EXPECT_NE(e.find("data.tgt_sampling.enabeld"), std::string::npos) << e;
  e = refused(R"({"src_sampling": {"enabled": true}})", R"({"model_type": "char"})");
  EXPECT_NE(e.find("data.src_sampling.enabled: sampling needs a unigram or bpe vocabulary, "
                   "vocab.model_type is char"),
            std::string::npos)
      << e;
}
