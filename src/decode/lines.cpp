#include "decode/lines.h"

#include "util/util.h"

namespace nmt {

std::vector<int64_t> encode_line(const SentencePiece& spm, const std::string& line, int64_t max_pieces,
                                 LineFixes& fixes) {
  int64_t replaced = 0;
  const std::string clean = sanitize_utf8(line, &replaced);
  fixes.replaced_bytes += replaced;
  if (trim(clean).empty()) return {};
  const auto pieces = spm.encode(clean);
  std::vector<int64_t> ids(pieces.begin(), pieces.end());
  if (static_cast<int64_t>(ids.size()) > max_pieces) {
    ids.resize(static_cast<size_t>(max_pieces));
    ++fixes.truncated;
  }
  return ids;
}

}  // namespace nmt
