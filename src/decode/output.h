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
};

// A score as every output prints it ("%.6f").
std::string format_score(double score);

// Writes the translation of input line `index` (0-based, in the whole input): its best
// hypothesis (all of them with nbest) as one line each. `alignment` hard: " ||| i-j ..." after
// each hypothesis (Marian's format); soft: one JSON object per hypothesis instead of its text.
// Its attention map, if any, goes to attention_dir as NNNNNN.svg/.json (1-based).
void write_translation(std::ostream& out, const Translation& t, int64_t index,
                       const OutputOptions& options, AlignmentMode alignment);

}  // namespace nmt
