#include "decode/lines.h"

#include "util/util.h"

namespace nmt {

std::vector<int64_t> encode_line(const SentencePiece& spm, const std::string& line,
                                 int64_t max_ids, LineFixes& fixes, int64_t prefix_id) {
  int64_t replaced = 0;
  const std::string clean = sanitize_utf8(line, &replaced);
  fixes.replaced_bytes += replaced;
  if (trim(clean).empty()) return {};
  const auto pieces = spm.encode(clean);
  if (pieces.empty()) return {};
  std::vector<int64_t> ids;
  if (prefix_id >= 0) ids.push_back(prefix_id);
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  if (static_cast<int64_t>(ids.size()) > max_ids) {
    ids.resize(static_cast<size_t>(max_ids));
    ++fixes.truncated;
  }
  return ids;
}

}  // namespace nmt
