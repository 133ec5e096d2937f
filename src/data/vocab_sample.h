// The vocabularies nmt trains itself: SentencePiece on a seeded reservoir sample of the
// training corpora, within the memory the machine has (nmt prepare, nmt train on text).
#pragma once

#include <cstdint>

#include "config/config.h"
#include "text/vocabs.h"

namespace nmt {

// Trains the vocabularies of the config's vocab section on a reservoir sample of
// vocab.input_sentence_size valid lines of the training corpora (all of them, in file order,
// when there are fewer: then the vocabulary is the one trained on the whole text). Holds no
// more text than the sample.
// Refuses (Error naming vocab.input_sentence_size) a sample whose training would need more
// memory than the machine has available.
Vocabs train_vocabs(const Config& config, int threads);

// Peak memory, in bytes, of training a vocabulary on a sample of `lines` lines and `text_bytes`
// bytes (with the process around it).
int64_t vocab_training_memory(int64_t text_bytes, int64_t lines);

}  // namespace nmt
