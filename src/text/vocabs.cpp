#include "text/vocabs.h"

#include "util/io.h"
#include "util/util.h"

namespace nmt {

Vocabs read_vocabs(const std::string& dir, bool joint) {
  if (joint) {
    auto sp = SentencePiece::from_file(dir + "/spm.model");
    return Vocabs{sp, sp, true};
  }
  return Vocabs{SentencePiece::from_file(dir + "/spm.src.model"),
                SentencePiece::from_file(dir + "/spm.tgt.model"), false};
}

void write_vocabs(const std::string& dir, const Vocabs& vocabs) {
  if (vocabs.joint) {
    write_file_atomic(dir + "/spm.model", vocabs.src.bytes());
  } else {
    write_file_atomic(dir + "/spm.src.model", vocabs.src.bytes());
    write_file_atomic(dir + "/spm.tgt.model", vocabs.tgt.bytes());
  }
}

std::optional<Vocabs> named_vocabs(const VocabConfig& v) {
  if (v.joint && !v.model.empty()) {
    auto sp = SentencePiece::from_file(v.model);
    return Vocabs{sp, sp, true};
  }
  if (!v.joint && !v.src_model.empty() && !v.tgt_model.empty())
    return Vocabs{SentencePiece::from_file(v.src_model), SentencePiece::from_file(v.tgt_model),
                  false};
  return std::nullopt;
}

std::optional<int> tag_piece(const SentencePiece& sp, const std::string& tag) {
  if (tag.empty()) return std::nullopt;
  const int id = sp.piece_to_id(tag);
  // Unknown pieces come back as <unk>; pad, bos and eos are the other specials.
  if (id <= kEosId) return std::nullopt;
  return id;
}

}  // namespace nmt
