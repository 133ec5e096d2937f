// Line-level translation: cleaning, length sorting, token-budget batches and n-best lists,
// always one result per input line; translate_stream runs it over a file a chunk at a time.
// How results are written is decode/output.h; their attention maps and alignments,
// decode/cross_attention.h.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "decode/alignment.h"
#include "decode/scorer.h"
#include "decode/search.h"
#include "model/device.h"
#include "plot/attention.h"
#include "text/vocabs.h"

namespace nmt {

struct PieceTexts;  // decode/terms.h

struct TranslateOptions {
  int64_t batch_tokens = 4096;             // source-token budget of one batch
  SearchOptions search;                    // strategy, beam size, length penalty, n-best, limit
  Precision precision = Precision::kFp32;  // bf16/fp16: CUDA autocast during search
  bool attention = false;                  // fill Translation::attention for non-empty lines
  int64_t attention_layer = -1;            // decoder layer to show (-1: the last)
  int64_t attention_head = -1;             // head to show (-1: mean over heads)
  // Batches decoded side by side, each on one thread (CPU): no synchronisation inside a step's
  // many small ops. 1: one batch at a time, each op on all of LibTorch's threads.
  int64_t batch_workers = 1;
  // Side by side only when a chunk has at least this many batches per worker: with fewer, the
  // longest batch leaves the other threads idle at the end.
  int64_t min_batches_per_worker = 1;
  // The id of a tag piece put before every non-empty source line's ids (--tag; -1 = none), as
  // data.train[i].tag puts it before a corpus's sources. It counts toward the input limit.
  int64_t tag_id = -1;
  // --alignment: each hypothesis' word alignment from the cross-attention of one decoder layer
  // (-1: the last), mean over heads, at the step that predicts each piece or the one that
  // consumes it (Shift-Att) (decode/cross_attention.h; docs/documents.md has the measurement
  // that chose the defaults).
  AlignmentMode alignment = AlignmentMode::kNone;
  int64_t alignment_layer = -1;
  AlignmentStep alignment_step = AlignmentStep::kPredict;
  // --reverse-checkpoint: a target-to-source model (owned by the caller) whose alignment of each
  // hypothesis to its source line is symmetrized with the forward one; null: forward only.
  Scorer* reverse_scorer = nullptr;
  const Vocabs* reverse_vocabs = nullptr;
  // --constraints / --avoid files ("" = none): one line per input line, tab-separated target
  // phrases, read in step with the input by translate_stream and evaluate_files.
  std::string constraints_file, avoid_file;
};

// Each line's target phrases as text (--constraints, --avoid): one entry per line, or empty
// vectors for none.
struct LineTerms {
  std::vector<std::vector<std::string>> constraints, avoid;
  // The target vocabulary's piece texts, built once per stream (translate_lines builds them
  // when this is null).
  std::shared_ptr<const PieceTexts> pieces;
};

struct Translation {
  std::vector<std::string> texts;         // n-best, best first; always search.nbest entries
  std::vector<double> scores;             // their scores (0 for an empty input line)
  std::optional<AttentionMap> attention;  // cross-attention of the best hypothesis
  std::vector<WordAlignment> alignments;  // with options.alignment, per hypothesis
  bool done = false;                      // translated (false: a stop came first)
  // A document's unit (doc/document.h): its sentences' own results, in order, which the output
  // reports per sentence (scores, alignments); empty for a line.
  std::vector<Translation> sentences;
};

// How a long job follows and stops translation. Both optional.
struct JobHooks {
  // Called after each batch (and for empty lines) with the lines it finished; calls never
  // overlap.
  std::function<void(int64_t lines)> on_lines;
  // Polled before each batch (and by translate_stream between chunks): true leaves the
  // remaining batches untranslated (done = false).
  std::function<bool()> stop_requested;
};

struct TranslateStats {
  int64_t lines = 0;
  int64_t truncated = 0;       // source lines cut to the model's longest input
  int64_t replaced_bytes = 0;  // invalid UTF-8 / NUL bytes replaced with U+FFFD
  int64_t output_tokens = 0;   // best hypotheses' tokens, EOS included

  TranslateStats& operator+=(const TranslateStats& other);
};

// Everything a decoding command (translate, eval) decides before it decodes, resolved once from
// its flags and the checkpoint's decode section (cli/decode_flags.h): where the models run, in
// what precision, how an ensemble mixes, and how lines are searched and batched.
struct DecodeOptions {
  torch::Device device{torch::kCPU};
  // As asked (the log says what auto chose); translate.precision is what it comes to on device.
  PrecisionSetting precision_setting = PrecisionSetting::kAuto;
  int threads = 1;                       // LibTorch's CPU threads
  bool int8 = false;                     // int8 output projection (CPU only)
  std::vector<double> ensemble_weights;  // one per model; empty: equal
  std::string tag;  // --tag: a source piece to start every line with ("" = none)
  TranslateOptions translate;
};

// Translates lines in input order with a scorer (a model or an ensemble) and its vocabularies.
// Empty or whitespace-only lines give empty outputs; invalid UTF-8 and NUL bytes become U+FFFD;
// over-long lines are truncated. Models must be in eval mode; they decode on their own device.
// `terms`: the lines' phrases to include and avoid, encoded with the target vocabulary; a phrase
// to include that does not fit the line's output length limit is dropped with a warning that
// names the line. `first_line`: the number of lines[0] in the whole input (0-based), which keys
// the sampling streams (a line samples the same in any chunk and after --resume) and warnings.
std::vector<Translation> translate_lines(Scorer& scorer, const Vocabs& vocabs,
                                         const std::vector<std::string>& lines,
                                         const TranslateOptions& options, TranslateStats* stats,
                                         const LineTerms& terms = {}, const JobHooks& hooks = {},
                                         int64_t first_line = 0);

// Best hypotheses only: the common case (validation, eval).
std::vector<std::string> translate_best(Scorer& scorer, const Vocabs& vocabs,
                                        const std::vector<std::string>& lines,
                                        const TranslateOptions& options, TranslateStats* stats,
                                        const LineTerms& terms = {});

struct OutputOptions;  // decode/output.h
class LineReader;

// What translate_stream reads and translates as one unit of input and output: by default a
// line, translated by translate_lines; a document format (doc/document.h) reads paragraphs and
// translates their sentences. Either may be left empty for the default.
struct UnitFormat {
  // Reads the next unit into `unit`; false at the end of the input.
  std::function<bool(LineReader& in, std::string& unit)> read;
  // Translates a chunk of units, the first of them unit number `first_unit` of the input, with
  // the chunk's terms; one result per unit.
  std::function<std::vector<Translation>(const std::vector<std::string>& units,
                                         const LineTerms& terms, const JobHooks& hooks,
                                         int64_t first_unit, TranslateStats* stats)>
      translate;
};

// How translate_stream reads, writes and follows a job.
struct StreamOptions {
  int64_t chunk_lines = 1000;  // lines read, translated and flushed at a time
  // Input lines already translated (--resume): read, skipped, and counted in line numbers.
  // A multiple of chunk_lines keeps every chunk, so every batch, as an uninterrupted run had it.
  int64_t skip_lines = 0;
  // When hooks.stop_requested turns true, the chunk's translated lines up to the first
  // untranslated one are written and the stream ends.
  JobHooks hooks;
  UnitFormat format;  // lines, unless a document format is asked
};

// Reads lines from `in` (plain or gzip, LF or CRLF; a last line without a newline counts; the
// reader delivers what a pipe has without waiting for a block), translates them a
// chunk at a time and writes exactly one result per input line (decode/output.h) to `out`,
// flushing after each chunk so output starts before the input ends. Throws Error when `out`
// fails. The stats count the lines written.
TranslateStats translate_stream(Scorer& scorer, const Vocabs& vocabs, LineReader& in,
                                std::ostream& out, const TranslateOptions& options,
                                const StreamOptions& stream, const OutputOptions& output);

// Options from a config's decode section, the strategy resolved (resolve_search_mode);
// beam_size overrides decode.beam_size when > 0.
TranslateOptions translate_options(const DecodeConfig& decode, int64_t beam_size = 0);
TranslateOptions translate_options(const Config& config, int64_t beam_size = 0);

}  // namespace nmt
