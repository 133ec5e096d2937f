// A line of text as the source or target ids that decoding and forced decoding take.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/spm.h"

namespace nmt {

// Counters of what encoding changed in the input.
struct LineFixes {
  int64_t truncated = 0;       // lines cut to the model's longest input
  int64_t replaced_bytes = 0;  // invalid UTF-8 / NUL bytes replaced with U+FFFD
};

// The pieces of one line (invalid UTF-8 and NUL bytes replaced), as int64 ids after the tag
// tag_id when it is >= 0 (text/vocabs.h put_tag), at most max_ids ids in all; empty for a blank
// line.
std::vector<int64_t> encode_line(const SentencePiece& spm, const std::string& line,
                                 int64_t max_ids, LineFixes& fixes, int64_t tag_id = -1);

}  // namespace nmt
