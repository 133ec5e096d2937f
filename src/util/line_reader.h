// Lines of a text file, plain or gzip-compressed, read a block at a time: corpora larger than
// memory are streamed, never loaded.
#pragma once

#include <cstdint>
#include <string>

#include "util/hash.h"

namespace nmt {

// Lines as read_lines() gives them: '\n' ends a line, a trailing '\r' is dropped, a last line
// without '\n' counts. gzip is recognised by its magic bytes (zlib reads other files as they
// are), whatever the name. A damaged or truncated gzip stream throws an Error that names the
// file and the last line read whole.
class LineReader {
 public:
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line into `line`; false at the end of the file.
  bool next(std::string& line);
  int64_t lines() const { return lines_; }
  // Of the (decompressed) bytes read so far: the whole content's once next() returned false.
  uint64_t content_hash() const { return hash_.digest(); }
  const std::string& path() const { return path_; }

 private:
  bool fill();  // reads the next block; false at the end

  std::string path_;
  void* file_ = nullptr;  // gzFile
  std::string buffer_;
  size_t pos_ = 0;
  bool eof_ = false;
  int64_t lines_ = 0;
  Hash64 hash_;
};

// Whether the file starts with gzip's magic bytes (1f 8b).
bool is_gzip_file(const std::string& path);

}  // namespace nmt
