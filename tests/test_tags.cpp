// Tagged corpora (data.train[i].tag): the tag is a user-defined piece of the source
// vocabulary, the store puts its id before every source sentence of the tagged corpus and
// records it, and store reuse follows the tags.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "config/parse.h"
#include "config/print.h"
#include "data/prepare.h"
#include "data/store.h"
#include "helpers.h"
#include "text/vocabs.h"
#include "util/util.h"

using namespace nmt;
using nlohmann::json;
using nmt_test::read_text;
using nmt_test::write_text;

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

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
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
