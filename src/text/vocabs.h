// The vocabularies of a model: one joint SentencePiece model, or one per side.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "text/spm.h"

namespace nmt {

struct Vocabs {
  SentencePiece src;  // source pieces
  SentencePiece tgt;  // target pieces (the same model as src when joint)
  bool joint = true;  // one model for both sides
};

// DIR/spm.model when joint, else DIR/spm.src.model and DIR/spm.tgt.model.
Vocabs read_vocabs(const std::string& dir, bool joint);
// Writes them under those names, atomically.
void write_vocabs(const std::string& dir, const Vocabs& vocabs);

// The vocabularies the config's files give (vocab.model, or both vocab.src_model and
// vocab.tgt_model), or none when one is to be trained.
std::optional<Vocabs> named_vocabs(const VocabConfig& v);

// The id of a corpus tag (data.train[i].tag, --tag) as one piece of `sp`, or nullopt when `sp`
// lacks it: the special pieces (<unk>, <s>, ...) are no tags.
std::optional<int> tag_piece(const SentencePiece& sp, const std::string& tag);

// Puts a tag's piece id (tag_id >= 0; -1: none) before a sentence's ids unless they are empty (an
// empty side stays empty, so filters still see it), then cuts them to max_len ids; returns
// whether it cut any. The one place a tag goes in: training data, translation, scoring and
// evaluation put it where the others do.
template <class Id>
bool put_tag(std::vector<Id>& ids, int64_t tag_id, size_t max_len = SIZE_MAX) {
  if (tag_id >= 0 && !ids.empty()) ids.insert(ids.begin(), static_cast<Id>(tag_id));
  if (ids.size() <= max_len) return false;
  ids.resize(max_len);
  return true;
}

}  // namespace nmt
