// Text to token store: nmt prepare, and nmt train when it is given text.
//
// One pass over the corpora (two when the vocabulary is trained: a sample first,
// data/vocab_sample.h), in blocks:
// memory does not grow with the corpus. Encoding runs on `threads` threads; the store's bytes
// do not depend on their number. Pairs are dropped by the first filter that applies, in this
// order: invalid UTF-8 (or NUL), empty side, over data.max_len, over data.max_len_ratio, a
// duplicate of an earlier pair (data.dedup). What each dropped is logged and kept in the header.
#pragma once

#include <string>

#include "config/config.h"
#include "data/store.h"
#include "text/vocabs.h"

namespace nmt {

// Writes a complete store of the config's training corpora to `dir`, encoded with `vocabs`
// (null: trained by train_vocabs and stored with it). The store is built in DIR.tmp-PID and
// renamed to DIR when whole; a failure (a full disk, a bad input) removes it and leaves DIR as
// it was.
void prepare_store(const Config& config, const Vocabs* vocabs, const std::string& dir, int threads);

// Removes DIR.tmp-PID directories left beside DIR by prepares whose process no longer runs
// (killed: nothing else leaves one), logging each; returns how many. Only directories that hold
// nothing but store files are touched.
int remove_stale_store_temps(const std::string& dir);

// Whether the config's store keeps the pairs' text (text.bin): subword sampling re-encodes it.
bool needs_text(const Config& config);

// The key of the config's store in a cache shared by runs: a hash of the inputs' absolute paths,
// the filters and the vocab section.
std::string store_key(const Config& config);

// Why a store cannot stand for a config's corpora: what differs, and the words for the log.
struct StoreMismatch {
  enum class Kind {
    kNone,          // it stands for them
    kCorpora,       // other input files, or another number of them
    kFilters,       // other data.* filters
    kVocabulary,    // another vocabulary, or one trained with another vocab section
    kInputChanged,  // an input file's content changed since the store was made
  };
  Kind kind = Kind::kNone;
  std::string why;
  explicit operator bool() const { return kind != Kind::kNone; }
};

// Whether the store can stand for the config's corpora: the same input files and filters, no
// input changed since, and its vocabulary is `vocabs` (null: it must have been trained with the
// config's vocab section).
StoreMismatch store_mismatch(const TokenStore& store, const Config& config, const Vocabs* vocabs);

}  // namespace nmt
