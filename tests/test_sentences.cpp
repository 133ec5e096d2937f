#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "text/sentences.h"

using namespace nmt;

namespace {

using Sentences = std::vector<std::string>;

// The sentences of text; checks that the spans are in order, non-empty, and that only the
// source's whitespace lies around and between them.
Sentences sentences(const SentenceSplitter& splitter, std::string_view text) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  Sentences out;
  size_t at = 0;
  for (const auto& span : splitter.split(text)) {
    EXPECT_LE(at, span.begin);
    EXPECT_LT(span.begin, span.end);
    EXPECT_LE(span.end, text.size());
    for (size_t i = at; i < span.begin; ++i) EXPECT_TRUE(is_space(text[i])) << text;
    EXPECT_FALSE(is_space(text[span.begin])) << text;
    EXPECT_FALSE(is_space(text[span.end - 1])) << text;
    out.emplace_back(text.substr(span.begin, span.end - span.begin));
    at = span.end;
  }
  for (size_t i = at; i < text.size(); ++i) EXPECT_TRUE(is_space(text[i])) << text;
  return out;
}

Sentences english(std::string_view text) { return sentences(SentenceSplitter("en"), text); }

}  // namespace

TEST(Sentences, ParsesMosesPrefixFiles) {
  const auto p = parse_nonbreaking_prefixes(
      "# comment\n\nDr\r\nMr  \n#NUMERIC_ONLY# is a comment\nNo #NUMERIC_ONLY# \nz.B\n");
  EXPECT_EQ(p.always, (std::unordered_set<std::string>{"Dr", "Mr", "z.B"}));
  EXPECT_EQ(p.numeric_only, (std::unordered_set<std::string>{"No"}));
  // As in Moses, a word listed twice takes its last kind.
  const auto twice = parse_nonbreaking_prefixes("Art\nArt #NUMERIC_ONLY#\n");
  EXPECT_TRUE(twice.always.empty());
  EXPECT_EQ(twice.numeric_only.count("Art"), 1u);
}

TEST(Sentences, BuiltInListsPerLanguage) {
  for (const char* language : {"en", "de", "fr", "es", "cs"})
    EXPECT_FALSE(nonbreaking_prefixes(language).always.empty()) << language;
  EXPECT_EQ(nonbreaking_prefixes("en").always.count("Dr"), 1u);
  EXPECT_EQ(nonbreaking_prefixes("en").numeric_only.count("No"), 1u);
  EXPECT_EQ(nonbreaking_prefixes("de").always.count("z.B"), 1u);
  EXPECT_EQ(&nonbreaking_prefixes("en-GB"), &nonbreaking_prefixes("en"));
  EXPECT_EQ(&nonbreaking_prefixes("EN"), &nonbreaking_prefixes("en"));
  EXPECT_TRUE(nonbreaking_prefixes("xx").always.empty());
  EXPECT_TRUE(nonbreaking_prefixes("").numeric_only.empty());
}

TEST(Sentences, HonorificsAndInitials) {
  EXPECT_EQ(english("Dr. Smith came. He left."), (Sentences{"Dr. Smith came.", "He left."}));
  EXPECT_EQ(english("Mr. J. R. R. Tolkien wrote. He died."),
            (Sentences{"Mr. J. R. R. Tolkien wrote.", "He died."}));
  // Initials need no list.
  EXPECT_EQ(sentences(SentenceSplitter("xx"), "J. Smith came. He left."),
            (Sentences{"J. Smith came.", "He left."}));
}

TEST(Sentences, GermanAbbreviations) {
  const SentenceSplitter de("de");
  EXPECT_EQ(sentences(de, "Das ist z. B. gut. Er kam."),
            (Sentences{"Das ist z. B. gut.", "Er kam."}));
  EXPECT_EQ(sentences(de, "Das ist z.B. gut. Er kam."),
            (Sentences{"Das ist z.B. gut.", "Er kam."}));
  EXPECT_EQ(sentences(de, "Er sagte: „Komm her.“ Dann ging er."),
            (Sentences{"Er sagte: „Komm her.“", "Dann ging er."}));
}

TEST(Sentences, NumericOnlyPrefixes) {
  EXPECT_EQ(english("No. 5 is here. No one came."), (Sentences{"No. 5 is here.", "No one came."}));
  // Before a word, a numeric-only prefix ends the sentence.
  EXPECT_EQ(english("He said no. No one came."), (Sentences{"He said no.", "No one came."}));
  EXPECT_EQ(english("See Art. 5 there. Then go."), (Sentences{"See Art. 5 there.", "Then go."}));
}

TEST(Sentences, NumbersAndAcronyms) {
  EXPECT_EQ(english("It weighs 3.5 kg. Then it fell."),
            (Sentences{"It weighs 3.5 kg.", "Then it fell."}));
  EXPECT_EQ(english("The U.S. Army came. It left."),
            (Sentences{"The U.S. Army came.", "It left."}));
  // Periods inside: an acronym when the last part is capitalised, as in Moses; lower-case
  // abbreviations ("e.g.") need the list.
  const SentenceSplitter generic("xx");
  EXPECT_EQ(sentences(generic, "It is 5 p.m. Then Ph.D. Students came."),
            (Sentences{"It is 5 p.m.", "Then Ph.D. Students came."}));
  EXPECT_EQ(sentences(generic, "See example.com. Then v1.2. It works."),
            (Sentences{"See example.com.", "Then v1.2.", "It works."}));
  EXPECT_EQ(english("Take e.g. Paris. It works."), (Sentences{"Take e.g. Paris.", "It works."}));
  EXPECT_EQ(english("He left at 5. 10 people came."),
            (Sentences{"He left at 5.", "10 people came."}));
  EXPECT_EQ(english("Why? 5 people came."), (Sentences{"Why?", "5 people came."}));
}

TEST(Sentences, LowerCaseDoesNotStartASentence) {
  EXPECT_EQ(english("He saw a cat. then a dog."), (Sentences{"He saw a cat. then a dog."}));
  EXPECT_EQ(english("Wait... what? Yes... Maybe."),
            (Sentences{"Wait... what?", "Yes...", "Maybe."}));
  EXPECT_EQ(english("Wait… what? Yes… Maybe."), (Sentences{"Wait… what?", "Yes…", "Maybe."}));
  EXPECT_EQ(english("Hello!! Are you there?? Yes."),
            (Sentences{"Hello!!", "Are you there??", "Yes."}));
}

TEST(Sentences, ClosingQuotesStayWithTheSentence) {
  EXPECT_EQ(english("He said \"Stop.\" Then he left."),
            (Sentences{"He said \"Stop.\"", "Then he left."}));
  EXPECT_EQ(english("(It rained.) We stayed. \"Why?\" she asked."),
            (Sentences{"(It rained.)", "We stayed.", "\"Why?\" she asked."}));
  EXPECT_EQ(english("He left. \"Where to?\" Nobody knew."),
            (Sentences{"He left.", "\"Where to?\"", "Nobody knew."}));
}

TEST(Sentences, FrenchGuillemetsAndSpanishMarks) {
  EXPECT_EQ(sentences(SentenceSplitter("fr"),
                      "« Bonjour. » Il est parti. « Où ? » Personne. Il dit « Non » enfin."),
            (Sentences{"« Bonjour. »", "Il est parti.", "« Où ? »", "Personne.",
                       "Il dit « Non » enfin."}));
  EXPECT_EQ(sentences(SentenceSplitter("fr"), "Il est parti. «Où?» Personne."),
            (Sentences{"Il est parti.", "«Où?»", "Personne."}));
  EXPECT_EQ(sentences(SentenceSplitter("es"), "¿Qué? ¡Hola! Sr. Pérez llegó. Él se fue."),
            (Sentences{"¿Qué?", "¡Hola!", "Sr. Pérez llegó.", "Él se fue."}));
}

TEST(Sentences, UpperCaseBeyondAscii) {
  EXPECT_EQ(english("It ended. Ångström came."), (Sentences{"It ended.", "Ångström came."}));
  EXPECT_EQ(sentences(SentenceSplitter("cs"), "Přišel. Čekal dlouho."),
            (Sentences{"Přišel.", "Čekal dlouho."}));
  EXPECT_EQ(sentences(SentenceSplitter("ru"), "Он ушёл. Она пришла. ещё нет."),
            (Sentences{"Он ушёл.", "Она пришла. ещё нет."}));
  EXPECT_EQ(sentences(SentenceSplitter("el"), "Ήρθε. Έφυγε."), (Sentences{"Ήρθε.", "Έφυγε."}));
}

TEST(Sentences, ListItems) {
  EXPECT_EQ(english("1. Buy milk. 2. Buy eggs."), (Sentences{"1. Buy milk.", "2. Buy eggs."}));
  EXPECT_EQ(english("1. Buy milk. 2. Buy eggs. (10). Done."),
            (Sentences{"1. Buy milk.", "2. Buy eggs.", "(10). Done."}));
  // Only a number that starts a sentence is a list item's.
  EXPECT_EQ(english("He has 2. Then he left."), (Sentences{"He has 2.", "Then he left."}));
  EXPECT_EQ(english("Buy milk. - Buy eggs."), (Sentences{"Buy milk.", "- Buy eggs."}));
}

TEST(Sentences, CjkFullStopsNeedNoSpace) {
  EXPECT_EQ(sentences(SentenceSplitter("zh"), "你好。我很好！谢谢。"),
            (Sentences{"你好。", "我很好！", "谢谢。"}));
  EXPECT_EQ(sentences(SentenceSplitter("ja"), "「はい。」と言った。 次。"),
            (Sentences{"「はい。」", "と言った。", "次。"}));
}

TEST(Sentences, SpansKeepTheSourceWhitespace) {
  const std::string text = "  First one.  Second one.\nThird one.\t\n";
  const auto spans = SentenceSplitter("en").split(text);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0], (SentenceSpan{2, 12}));
  EXPECT_EQ(text.substr(spans[0].end, spans[1].begin - spans[0].end), "  ");
  EXPECT_EQ(text.substr(spans[1].end, spans[2].begin - spans[1].end), "\n");
  EXPECT_EQ(text.substr(spans[2].begin, spans[2].end - spans[2].begin), "Third one.");
  EXPECT_EQ(text.substr(spans[2].end), "\t\n");
}

TEST(Sentences, BlankAndUnpunctuatedText) {
  EXPECT_TRUE(SentenceSplitter("en").split("").empty());
  EXPECT_TRUE(SentenceSplitter("en").split("  \n\t \u00A0 ").empty());
  EXPECT_EQ(english("  just some words  "), (Sentences{"just some words"}));
  EXPECT_EQ(english("One."), (Sentences{"One."}));
  EXPECT_EQ(english("Ends with a quote. \""), (Sentences{"Ends with a quote. \""}));
}

TEST(Sentences, CustomPrefixes) {
  NonbreakingPrefixes p;
  p.always.insert("approx");
  const SentenceSplitter splitter(std::move(p));
  EXPECT_EQ(sentences(splitter, "It is approx. Ten. Done."),
            (Sentences{"It is approx. Ten.", "Done."}));
}

TEST(Sentences, InvalidUtf8IsOrdinaryText) {
  const std::string text = "Bad \xFF\xFE byte. Next \xC3 one. \xE2\x82 End\xED\xA0\x80. \xFF";
  EXPECT_EQ(english(text),
            (Sentences{"Bad \xFF\xFE byte.", "Next \xC3 one. \xE2\x82 End\xED\xA0\x80. \xFF"}));
  EXPECT_EQ(english("\xC3"), (Sentences{"\xC3"}));
}

TEST(Sentences, LongLinesTakeLinearTime) {
  const SentenceSplitter splitter("en");
  // The sentences of a 1 MB line, which must take well under a second even in a sanitizer build.
  const auto count = [&](const std::string& line) {
    const auto start = std::chrono::steady_clock::now();
    const size_t n = splitter.split(line).size();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took.count(), 1.0) << line.substr(0, 40);
    return n;
  };
  std::string sentences_line, word_line(1 << 20, 'a');
  while (sentences_line.size() < (1 << 20)) sentences_line += "This is it. Dr. No. U.S. A... ";
  for (size_t i = 0; i < word_line.size(); i += 1000) word_line[i] = '.';
  // Three sentences in each 30 bytes: "This is it." "Dr. No." "U.S. A..."
  EXPECT_EQ(count(sentences_line), sentences_line.size() / 30 * 3);
  EXPECT_EQ(count(word_line), 1u);
  EXPECT_EQ(count(std::string(1 << 20, '.')), 1u);
  EXPECT_EQ(count("Done. " + std::string(1 << 20, '(') + " X"), 2u);
  EXPECT_EQ(count(std::string(1 << 20, ' ')), 0u);
}
