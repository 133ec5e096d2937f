// Forced decoding: the log-probability a scorer (a model or an ensemble) gives a target sentence
// for its source, as marian-scorer and fairseq's scoring do. It filters noisy corpora (dual
// conditional cross-entropy, Junczys-Dowmunt 2018), rescores n-best lists (nmt score) and gives
// evaluation its corpus loss: one teacher-forced pass and one batch planner serve them all.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "decode/scorer.h"
#include "model/device.h"
#include "text/vocabs.h"

namespace nmt {

class LineReader;

struct ScoreOptions {
  int64_t batch_tokens = 4096;             // padded cells (rows x the longer side) per batch
  bool normalize = false;                  // divide by the target's pieces + 1 (EOS)
  Precision precision = Precision::kFp32;  // bf16/fp16: autocast, as translate
  int64_t chunk_lines = 10000;             // pairs read, scored and written at a time
  int64_t tag_id = -1;                     // a tag's id before every source (-1 = none)
};

struct ScoreStats {
  int64_t pairs = 0;
  int64_t truncated = 0;       // sides cut to the model's longest input
  int64_t replaced_bytes = 0;  // invalid UTF-8 / NUL bytes replaced with U+FFFD
};

// One batch teacher-forced: per row, the sum of the log-probabilities of the target ids and EOS
// given the source ids (EOS-terminated; targets without BOS or EOS), as search sums them for a
// hypothesis it ends.
std::vector<double> forced_log_probs(Scorer& scorer, const std::vector<std::vector<int64_t>>& src,
                                     const std::vector<std::vector<int64_t>>& tgt,
                                     Precision precision);

// The same for pairs of any number: sorted by their padded width (the longer of the source and
// the target with EOS) and batched by plan_batches within batch_tokens padded cells. Returns
// the log-probabilities in the pairs' order.
std::vector<double> forced_decode(Scorer& scorer, const std::vector<std::vector<int64_t>>& src,
                                  const std::vector<std::vector<int64_t>>& tgt,
                                  int64_t batch_tokens, Precision precision);

// Per pair, log P(target | source): the sum of the natural-log probabilities of the target's
// pieces and EOS, teacher-forced, without label smoothing (with normalize, over pieces + 1). The
// source is encoded as translate encodes it (a blank source is EOS alone); a blank target is EOS
// alone. Text is scored as SentencePiece segments it: a hypothesis whose pieces decode to text
// that encodes to other pieces (rare) scores as those. Pairs are sorted by length and batched
// within the budget. Throws Error when the sizes differ.
std::vector<double> score_pairs(Scorer& scorer, const Vocabs& vocabs,
                                const std::vector<std::string>& src,
                                const std::vector<std::string>& tgt, const ScoreOptions& options,
                                ScoreStats* stats);

// Reads aligned lines from `src` and `tgt` a chunk at a time (memory stays flat whatever their
// size) and writes one score per pair ("%.6f") to `out`, flushed after each chunk. Throws Error
// naming the file that ends first when the line counts differ, or when `out` fails.
ScoreStats score_stream(Scorer& scorer, const Vocabs& vocabs, LineReader& src, LineReader& tgt,
                        std::ostream& out, const ScoreOptions& options);

}  // namespace nmt
