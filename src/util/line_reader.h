// Lines of a text file, plain or gzip-compressed, read a block at a time: corpora larger than
// memory are streamed, never loaded. Every input nmt reads goes through it: training and
// validation corpora, translate's input, eval's files, standard input.
#pragma once

#include <cstdint>
#include <string>

#include "util/hash.h"

namespace nmt {

// Lines as read_lines() gives them: '\n' ends a line, a trailing '\r' is dropped, a last line
// without '\n' counts. gzip is recognised by its magic bytes, whatever the name (concatenated
// members are read on; bytes after the last member that are not gzip are ignored, as gzip -d
// does). A damaged or truncated gzip stream throws an Error that names the file and the last
// line read whole. Reads return what the input has: a line written to a pipe or FIFO is
// delivered without waiting for a full block.
class LineReader {
 public:
  // `path` "-" reads standard input.
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
  bool fill();                 // appends the next bytes to buffer_; false at the end
  void start();                // reads the first bytes: plain or gzip
  size_t inflate_into(size_t have);
  size_t read_raw(char* dst, size_t n);
  [[noreturn]] void fail(const std::string& reason) const;

  std::string path_;
  int fd_ = -1;
  bool own_fd_ = false;
  void* zstream_ = nullptr;  // z_stream, for gzip input
  std::string raw_;          // compressed bytes not yet inflated (or the plain first block)
  bool started_ = false, member_open_ = false, gzip_done_ = false;
  std::string buffer_;
  size_t pos_ = 0;
  bool eof_ = false;
  int64_t lines_ = 0;
  Hash64 hash_;
};

}  // namespace nmt
