// Text to token store: nmt prepare, and nmt train when it is given text.
//
// One pass over the corpora (two when the vocabulary is trained: a sample first), in blocks:
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

// Trains the vocabularies of the config's vocab section on a reservoir sample of
// vocab.input_sentence_size valid lines of the training corpora (all of them, in file order,
// when there are fewer: then the vocabulary is the one trained on the whole text). Holds no
// more text than the sample.
Vocabs train_vocabs(const Config& config, int threads);

// Writes a complete store of the config's training corpora to `dir`, encoded with `vocabs`
// (null: trained by train_vocabs and stored with it). The store is built in DIR.tmp-PID and
// renamed to DIR when whole; a failure (a full disk, a bad input) removes it and leaves DIR as
// it was.
void prepare_store(const Config& config, const Vocabs* vocabs, const std::string& dir, int threads);

// The key of the config's store in a cache shared by runs: a hash of the inputs' absolute paths,
// the filters and the vocab section.
std::string store_key(const Config& config);

// Why the store at `dir` cannot stand for the config's corpora ("" when it can): its inputs or
// filters differ, an input changed since, or its vocabulary is not `vocabs` (null: it must have
// been trained with the config's vocab section).
std::string store_mismatch(const TokenStore& store, const Config& config, const Vocabs* vocabs);

}  // namespace nmt
