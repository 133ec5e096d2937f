#include "decode/encode.h"

#include "text/vocabs.h"
#include "util/util.h"

namespace nmt {

std::vector<int64_t> encode_line(const SentencePiece& spm, const std::string& line, int64_t max_ids,
                                 LineFixes& fixes, int64_t tag_id) {
  int64_t replaced = 0;
  const std::string clean = sanitize_utf8(line, &replaced);
  fixes.replaced_bytes += replaced;
  if (trim(clean).empty()) return {};
  const auto pieces = spm.encode(clean);
  std::vector<int64_t> ids(pieces.begin(), pieces.end());
  if (put_tag(ids, tag_id, static_cast<size_t>(max_ids))) ++fixes.truncated;
  return ids;
}

}  // namespace nmt
