// Tagged corpora (data.train[i].tag): the tag is a user-defined piece of the source
// vocabulary.
#include <gtest/gtest.h>

#include <algorithm>

#include "text/vocabs.h"
#include "util/util.h"

using namespace nmt;

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
