// How `nmt translate` writes its results, apart from how they are made (Marian's
// OutputPrinter; CTranslate2 keeps results and their writing apart too): one line per input line,
// or n-best lines, with a score column, hard alignments or soft-alignment JSON, and attention
// files.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "decode/alignment.h"
#include "decode/translate.h"

namespace nmt {

struct OutputOptions {
  bool nbest = false;         // "index ||| hypothesis ||| score" lines, search.nbest per input
  bool scores = false;        // a tab-separated score column after each hypothesis
  std::string attention_dir;  // NNNNNN.svg/.json per non-empty line when results carry attention
  // The results are a document's units (doc/document.h): scores and alignments per sentence.
  bool document = false;
};

// A score as every output prints it ("%.6f").
std::string format_score(double score);

// Writes the translation of input line `index` (0-based, in the whole input): its best
// hypothesis (all of them with nbest) as one line each. `alignment` hard: " ||| i-j ..." after
// each hypothesis (Marian's format); soft: one JSON object per hypothesis instead of its text.
// Its attention map, if any, goes to attention_dir as NNNNNN.svg/.json (1-based). A document's
// unit is one line: its text, then " ||| k:i-j ..." (word i of sentence k's source, word j of
// its translation) with a hard alignment, a tab and its sentences' scores with scores; a soft
// alignment makes it one JSON object {"translation", "sentences": [per sentence]}.
void write_translation(std::ostream& out, const Translation& t, int64_t index,
                       const OutputOptions& options, AlignmentMode alignment);

// The best hypothesis of one result as JSON fields, with write_translation's values (nmt serve):
// "translation"; with scores, "score" (a document's unit: a list, one per sentence); with an
// alignment, "alignment": hard, its text ("i-j ...", a unit's "k:i-j ..."); soft, its object (a
// unit's: a list, one per sentence).
nlohmann::json result_json(const Translation& t, const OutputOptions& options,
                           AlignmentMode alignment);

}  // namespace nmt
