// Documents, not lines (`translate --format text|html`): each unit of input is a paragraph, split
// into sentences (text/sentences.h); all sentences of a chunk go through one batched search, and
// each paragraph is put back together with the source's own whitespace around and between its
// sentences (Bergamot's faithful strategy). HTML's blocks are such paragraphs, and its markup
// goes back on the translation through the sentences' word alignments (doc/html.h). This room
// sits above decode and calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "decode/scorer.h"
#include "decode/translate.h"
#include "text/sentences.h"
#include "text/vocabs.h"

namespace nmt {

struct DocumentOptions {
  InputFormat format = InputFormat::kLines;  // --format
  // --wrapped: paragraphs are separated by blank lines and the lines inside one are joined with
  // a space; each paragraph becomes one output line and each blank line stays one.
  bool wrapped = false;
  std::string language = "en";  // the splitter's non-breaking prefixes (--source-lang)
  bool html_lenient = false;    // --html-lenient: unmatched markup copied as text
};

// One paragraph's sentences for translation: spans of the paragraph (text/sentences.h), a
// sentence whose pieces would not fit the model (`max_ids` source ids) cut at spaces into
// pieces that do (a word longer than that alone is left to translate's truncation, which
// counts it).
std::vector<SentenceSpan> translation_spans(const SentenceSplitter& splitter,
                                            const SentencePiece& spm, const std::string& paragraph,
                                            int64_t max_ids);

// The paragraph rebuilt from its spans' translations: the text before the first span, between
// two and after the last, as the source had it, around the translations in order.
std::string rebuild_paragraph(const std::string& paragraph, const std::vector<SentenceSpan>& spans,
                              const std::vector<std::string>& translations);

// Translates paragraphs: every sentence of every paragraph in one translate_lines call, then one
// result per paragraph, its text rebuilt and its sentences' own results kept (for scores and
// alignments). A paragraph is done when all of its sentences are. `spans`, when given, gets each
// paragraph's sentence spans.
std::vector<Translation> translate_paragraphs(
    Scorer& scorer, const Vocabs& vocabs, const std::vector<std::string>& paragraphs,
    const TranslateOptions& options, const SentenceSplitter& splitter, const JobHooks& hooks,
    int64_t first_unit, TranslateStats* stats,
    std::vector<std::vector<SentenceSpan>>* spans = nullptr);

// Translates units of HTML: their blocks as paragraphs (translate_paragraphs, with hard word
// alignments), the markup put back by HtmlDocument::restore. Malformed markup throws Error
// naming the line (first_unit + 1 for the first unit) and column, unless lenient.
std::vector<Translation> translate_html(Scorer& scorer, const Vocabs& vocabs,
                                        const std::vector<std::string>& units,
                                        const TranslateOptions& options,
                                        const SentenceSplitter& splitter, bool lenient,
                                        const JobHooks& hooks, int64_t first_unit,
                                        TranslateStats* stats);

// Sets stream.format to read and translate `document`'s units (lines: nothing to set). Checks
// what a document cannot take first (n-best lists, attention maps, constraint and avoid files:
// their lines are the input's, not the sentences'), throwing Error naming the flag. The scorer,
// vocabularies and options must outlive the stream (HTML keeps a copy of the options that asks
// for hard alignments).
void use_document_format(StreamOptions& stream, Scorer& scorer, const Vocabs& vocabs,
                         const TranslateOptions& options, const DocumentOptions& document);

}  // namespace nmt
