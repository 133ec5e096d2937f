// Tagged corpora (data.train[i].tag, translate --tag): the tag is a user-defined piece of the
// source vocabulary, the store puts its id before every source sentence of the tagged corpus
// and records it, store reuse follows the tags, and decoding puts the id first when asked.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "config/parse.h"
#include "config/print.h"
#include "data/prepare.h"
#include "data/store.h"
#include "data/tensors.h"
#include "decode/search.h"
#include "decode/translate.h"
#include "helpers.h"
#include "model_helpers.h"
#include "text/vocabs.h"
#include "util/util.h"

using namespace nmt;
using nlohmann::json;
using nmt_test::nmt_bin;
using nmt_test::read_text;
using nmt_test::run_command;
using nmt_test::write_text;

using nmt_test::error_of;

namespace {

// Number words, as the quickstart corpus has them.
std::string number_text() {
  std::string text;
  const char* words[] = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
  for (int i = 0; i < 400; ++i)
    text += std::string(words[i % 9]) + " hundred " + words[(i * 7) % 9] + "\n";
  return text;
}

// A tiny joint vocabulary with `symbols` as user-defined pieces.
Vocabs tiny_vocabs(const std::vector<std::string>& symbols) {
  SpmTrainOptions o;
  o.vocab_size = 40;
  o.user_symbols = symbols;
  const auto sp = SentencePiece::train(number_text(), o);
  return Vocabs{sp, sp, true};
}

// Two corpora: a.* untagged, b.* with `tag_b` ("" = none).
Config two_corpora(const nmt_test::TempDir& dir, const std::string& tag_b) {
  const std::string tag = tag_b.empty() ? "" : R"(, "tag": ")" + tag_b + "\"";
  return parse_config(R"({"train": {"max_steps": 1}})",
                      {R"(data.train=[{"src": ")" + (dir / "a.src") + R"(", "tgt": ")" +
                           (dir / "a.tgt") + R"("}, {"src": ")" + (dir / "b.src") +
                           R"(", "tgt": ")" + (dir / "b.tgt") + "\"" + tag + "}]",
                       "data.valid_src=", "data.valid_tgt="});
}

// A store's source ids of pair i.
std::vector<int64_t> source_of(const TokenStore& s, int64_t i) {
  std::vector<int64_t> x;
  s.append_src(i, x);
  return x;
}

}  // namespace

// A user-defined symbol is one piece; tag_piece finds it, and refuses pieces the vocabulary
// lacks and the special ones.
TEST(Tags, UserSymbolsAreWholePieces) {
  const Vocabs tagged = tiny_vocabs({"<BT>", "<FT>"});
  const auto bt = tag_piece(tagged.src, "<BT>");
  ASSERT_TRUE(bt.has_value());
  EXPECT_GT(*bt, kEosId);
  EXPECT_EQ(tagged.src.piece(*bt), "<BT>");
  EXPECT_EQ(tagged.src.piece_to_id("<BT>"), *bt);
  EXPECT_NE(tag_piece(tagged.src, "<FT>"), bt);
  // Even inside text the symbol stays whole.
  const auto ids = tagged.src.encode("one<BT>two");
  EXPECT_NE(std::find(ids.begin(), ids.end(), *bt), ids.end());

  const Vocabs plain = tiny_vocabs({});
  EXPECT_EQ(plain.src.piece_to_id("<BT>"), kUnkId);
  EXPECT_FALSE(tag_piece(plain.src, "<BT>").has_value());
  EXPECT_FALSE(tag_piece(tagged.src, "</s>").has_value());
  EXPECT_FALSE(tag_piece(tagged.src, "<unk>").has_value());
  EXPECT_FALSE(tag_piece(tagged.src, "").has_value());
  EXPECT_NE(plain.src.bytes(), tagged.src.bytes());
}

// The tagged corpus's sources start with the tag's id, followed by the text's own pieces; the
// untagged corpus's never hold it. The header records the tags, only where they are.
TEST(Tags, StorePutsTheTagIdBeforeTaggedSources) {
  nmt_test::TempDir dir;
  write_text(dir / "a.src", "one hundred two\nseven\n\nnine hundred one\n");
  write_text(dir / "a.tgt", "two hundred one\nfour\nsix\none\n");
  write_text(dir / "b.src", "one hundred two\nthree hundred\n\n");
  write_text(dir / "b.tgt", "two hundred one\nfive\nsix\n");
  const Vocabs vocabs = tiny_vocabs({"<BT>"});
  const int bt = tag_piece(vocabs.src, "<BT>").value();
  const Config c = two_corpora(dir, "<BT>");
  prepare_store(c, &vocabs, dir / "store", 2);
  const auto s = TokenStore::open(dir / "store");
  const StoreHeader& h = s->header();
  ASSERT_EQ(h.inputs.size(), 2u);
  EXPECT_EQ(h.inputs[0].tag, "");
  EXPECT_EQ(h.inputs[1].tag, "<BT>");
  EXPECT_EQ(h.inputs[0].end - h.inputs[0].begin, 3);  // the empty line is dropped
  EXPECT_EQ(h.inputs[1].end - h.inputs[1].begin, 2);  // tagged or not
  for (int64_t i = h.inputs[0].begin; i < h.inputs[0].end; ++i) {
    const auto x = source_of(*s, i);
    EXPECT_EQ(std::count(x.begin(), x.end(), bt), 0) << i;
  }
  const std::vector<std::string> b_src = {"one hundred two", "three hundred"};
  for (int64_t i = h.inputs[1].begin; i < h.inputs[1].end; ++i) {
    const auto x = source_of(*s, i);
    ASSERT_FALSE(x.empty());
    EXPECT_EQ(x.front(), bt) << i;
    const auto text = vocabs.src.encode(b_src[i - h.inputs[1].begin]);
    EXPECT_EQ(std::vector<int64_t>(x.begin() + 1, x.end()),
              std::vector<int64_t>(text.begin(), text.end()));
  }
  // The same text untagged and tagged: not duplicates.
  prepare_store(parse_config(config_to_json(c), {"data.dedup=true"}), &vocabs, dir / "dedup", 1);
  EXPECT_EQ(TokenStore::open(dir / "dedup")->size(), 5);
  // On disk: a "tag" key where there is a tag, none elsewhere (older readers see no change).
  const json j = json::parse(read_text(dir / "store/header.json"));
  EXPECT_FALSE(j["inputs"][0].contains("tag"));
  EXPECT_EQ(j["inputs"][1]["tag"], "<BT>");

  // An untagged config prepares no tag at all.
  prepare_store(two_corpora(dir, ""), &vocabs, dir / "plain", 1);
  const auto p = TokenStore::open(dir / "plain");
  EXPECT_EQ(p->header().inputs[1].tag, "");
  EXPECT_NE(source_of(*p, p->header().inputs[1].begin).front(), bt);
  EXPECT_EQ(read_text(dir / "plain/header.json").find("\"tag"), std::string::npos);
}

// The store key and the reuse check follow the tags: another tag, or none, is another store.
TEST(Tags, StoreReuseFollowsTheTags) {
  nmt_test::TempDir dir;
  for (const char* f : {"a.src", "a.tgt", "b.src", "b.tgt"}) write_text(dir / f, "one\ntwo\n");
  const Config tagged = two_corpora(dir, "<BT>"), other = two_corpora(dir, "<FT>"),
               plain = two_corpora(dir, "");
  EXPECT_NE(store_key(tagged), store_key(plain));
  EXPECT_NE(store_key(tagged), store_key(other));
  EXPECT_EQ(store_key(tagged), store_key(two_corpora(dir, "<BT>")));
  EXPECT_FALSE(VocabTraining::of(tagged) == VocabTraining::of(plain));
  EXPECT_EQ(VocabTraining::of(tagged).tags, std::vector<std::string>{"<BT>"});

  const Vocabs vocabs = tiny_vocabs({"<BT>", "<FT>"});
  prepare_store(tagged, &vocabs, dir / "store", 1);
  const auto s = TokenStore::open(dir / "store");
  EXPECT_FALSE(store_mismatch(*s, tagged, &vocabs));
  for (const Config* c : {&plain, &other}) {
    const StoreMismatch m = store_mismatch(*s, *c, &vocabs);
    EXPECT_EQ(m.kind, StoreMismatch::Kind::kCorpora) << m.why;
    EXPECT_NE(m.why.find("has tag \"<BT>\""), std::string::npos) << m.why;
  }
}

// A given vocabulary that lacks the tag is refused before anything is encoded, by the key.
TEST(Tags, VocabularyWithoutTheTagIsRefused) {
  nmt_test::TempDir dir;
  for (const char* f : {"a.src", "a.tgt", "b.src", "b.tgt"}) write_text(dir / f, "one\ntwo\n");
  const Vocabs plain = tiny_vocabs({});
  const std::string msg =
      error_of([&] { prepare_store(two_corpora(dir, "<BT>"), &plain, dir / "store", 1); });
  EXPECT_EQ(msg.rfind("data.train[1].tag: \"<BT>\" is not one piece of the source vocabulary", 0),
            0u)
      << msg;
  EXPECT_FALSE(std::filesystem::exists(dir / "store"));
}

// translate_lines with tag_id decodes what search decodes from [tag] + pieces + EOS,
// and the tag counts toward the model's input limit.
TEST(Tags, TranslateLinesPutsTheTagIdFirst) {
  const Vocabs vocabs = tiny_vocabs({"<BT>"});
  const int bt = tag_piece(vocabs.src, "<BT>").value();
  const std::vector<std::string> lines = {"one hundred two", "seven hundred nine four", "three"};
  ModelConfig mc = nmt_test::tiny_model();
  const auto longest = static_cast<int64_t>(vocabs.src.encode(lines[1]).size());
  for (const size_t i : {0, 2})
    ASSERT_LT(static_cast<int64_t>(vocabs.src.encode(lines[i]).size()), longest);
  mc.max_positions = longest + 1;  // lines[1] and EOS fit exactly; with the tag they do not
  ModelScorer scorer(nmt_test::random_model(mc, vocabs.src.size(), 7));
  TranslateOptions o;
  o.search.beam_size = 2;
  o.search.mode = SearchMode::kBeam;
  o.tag_id = bt;
  TranslateOptions untagged = o;
  untagged.tag_id = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    TranslateStats with_tag, without;
    const auto got = translate_lines(scorer, vocabs, {lines[i]}, o, &with_tag);
    const auto plain = translate_lines(scorer, vocabs, {lines[i]}, untagged, &without);
    EXPECT_EQ(without.truncated, 0) << lines[i];
    EXPECT_EQ(with_tag.truncated, i == 1 ? 1 : 0) << lines[i];
    // What search gives on the ids with the tag first, cut to the limit.
    std::vector<int64_t> ids = {bt};
    for (const int p : vocabs.src.encode(lines[i])) ids.push_back(p);
    if (static_cast<int64_t>(ids.size()) > mc.max_positions - 1) ids.resize(mc.max_positions - 1);
    ids.push_back(kEosId);
    const auto hyps = search(scorer, pad_sequences({ids}, kPadId), o.search);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].texts[0], vocabs.tgt.decode(hyps[0][0].tokens)) << lines[i];
    EXPECT_NEAR(got[0].scores[0], hyps[0][0].score, 1e-6) << lines[i];
    EXPECT_NE(got[0].scores[0], plain[0].scores[0]) << lines[i];  // the encoder saw the tag
  }
  // Empty lines stay empty: no tag alone is translated.
  const auto empty = translate_lines(scorer, vocabs, {"", "  "}, o, nullptr);
  EXPECT_EQ(empty[0].texts[0], "");
  EXPECT_EQ(empty[1].scores[0], 0.0);
}

// A tiny tagged corpus trains end to end: the trained vocabulary holds the tag as a piece, the
// store prefixes it, translate and eval take --tag, and an unknown tag or a tag the store lacks
// is refused.
TEST(Tags, TaggedCorpusTrainsAndTranslatesWithTheTag) {
  nmt_test::TempDir dir;
  for (const char* name : {"a", "b"}) {
    const auto r =
        run_command("python3 scripts/make_quickstart_data.py --out " + (dir / name) +
                    " --train 200 --valid 5 --test 5 --seed " + (name[0] == 'a' ? "1" : "2"));
    ASSERT_EQ(r.status, 0) << r.output;
  }
  const std::string corpora = "'data.train=[{\"src\": \"" + (dir / "a/train.en") +
                              "\", \"tgt\": \"" + (dir / "a/train.de") + "\"}, {\"src\": \"" +
                              (dir / "b/train.en") + "\", \"tgt\": \"" + (dir / "b/train.de") +
                              "\", \"tag\": \"<BT>\"}]'";
  const std::string run = dir / "run";
  // data.train instead of the quickstart config's train_src/train_tgt.
  const std::string config = nmt_bin() +
                             " train --config configs/quickstart.json --set data.train_src="
                             " --set data.train_tgt= --set data.valid_src= --set data.valid_tgt=";
  const std::string train = config +
                            " --set model.d_model=32 --set model.d_ff=64 --set model.heads=2"
                            " --set vocab.size=80 --set train.threads=1"
                            " --set train.batch_tokens=500 --set train.warmup_steps=10"
                            " --set train.max_steps=3 --set train.save_every=100 --set " +
                            corpora;
  auto r = run_command(train + " --run-dir " + run);
  ASSERT_EQ(r.status, 0) << r.output;
  const Vocabs vocabs = read_vocabs(run, true);
  const auto bt = tag_piece(vocabs.src, "<BT>");
  ASSERT_TRUE(bt.has_value());
  const auto s = TokenStore::open(run + "/store");
  ASSERT_TRUE(s->header().trained.has_value());
  EXPECT_EQ(s->header().trained->tags, std::vector<std::string>{"<BT>"});
  const auto& in = s->header().inputs;
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[1].tag, "<BT>");
  for (int64_t i = in[0].begin; i < in[0].end; ++i) EXPECT_NE(source_of(*s, i).front(), *bt);
  for (int64_t i = in[1].begin; i < in[1].end; ++i) EXPECT_EQ(source_of(*s, i).front(), *bt);

  const std::string translate = nmt_bin() + " translate --checkpoint " + run + " --threads 1" +
                                " --input " + (dir / "b/test.en") + " --output " +
                                (dir / "out.txt") + " --tag ";
  r = run_command(translate + "'<BT>'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("source lines start with tag <BT> (piece " + std::to_string(*bt) + ")"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(nmt_test::read_lines_of(dir / "out.txt").size(), 5u);
  r = run_command(nmt_bin() + " eval --checkpoint " + run + " --threads 1 --src " +
                  (dir / "b/test.en") + " --ref " + (dir / "b/test.de") + " --tag '<BT>'");
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_command(translate + "'<XX>'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("tag '<XX>' is not a piece of the source vocabulary (train with "
                          "data.train[i].tag)"),
            std::string::npos)
      << r.output;
  // Training from the store: a tag data.train gives must be the store's.
  r = run_command(train + " --run-dir " + (dir / "from-store") + " --set data.train_store=" + run +
                  "/store");
  EXPECT_EQ(r.status, 0) << r.output;
  std::string other = corpora;
  other.replace(other.find("<BT>"), 4, "<FT>");
  r = run_command(config + " --run-dir " + (dir / "foreign") + " --set " + other +
                  " --set data.train_store=" + run + "/store");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("data.train[1].tag: \"<FT>\", but corpus 1 of the store"),
            std::string::npos)
      << r.output;
}
