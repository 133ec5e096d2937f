// What cross-attention shows of a batch's hypotheses, read back in one teacher-forced pass:
// the attention maps of --attention-out and the word alignments of --alignment.
#pragma once

#include <string>
#include <vector>

#include "decode/scorer.h"
#include "decode/search.h"
#include "decode/translate.h"
#include "text/vocabs.h"

namespace nmt {

// Cross-attention of each row's best hypothesis (--attention-out): options.attention_layer's
// (-1: the last), mean over heads or options.attention_head, into each result's attention.
void attach_attention(Scorer& scorer, const Vocabs& vocabs,
                      const std::vector<std::vector<int64_t>>& src_rows,
                      const std::vector<const Hypothesis*>& best, const TranslateOptions& o,
                      std::vector<Translation*>& results);

// Every hypothesis' word alignment (--alignment), from one teacher-forced pass over all of
// them: options.alignment_layer's cross-attention (-1: the last layer), mean over heads,
// at options.alignment_step, over the source line's pieces (not the tag or EOS), summed into
// words. The hard links are each direction's best (hard_alignment), symmetrized by
// grow_diag_final_and with options.reverse_scorer's alignment of the hypothesis to the source
// line when there is one. A search that gave fewer hypotheses than nbest repeats its last
// alignment, as its texts.
void attach_alignments(Scorer& scorer, const Vocabs& vocabs,
                       const std::vector<std::vector<int64_t>>& src_rows,
                       const std::vector<std::string>& source_lines,
                       const std::vector<std::vector<Hypothesis>>& hyps, const TranslateOptions& o,
                       std::vector<Translation*>& results);

}  // namespace nmt
