#include "util/line_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/util.h"

namespace nmt {

namespace {
constexpr size_t kBlock = 1 << 20;
}

LineReader::LineReader(const std::string& path) : path_(path) {
  errno = 0;
  gzFile f = ::gzopen(path.c_str(), "rb");
  if (f == nullptr)
    throw Error("cannot open " + path + ": " + std::strerror(errno != 0 ? errno : ENOMEM));
  ::gzbuffer(f, 1 << 18);
  file_ = f;
}

LineReader::~LineReader() {
  if (file_ != nullptr) ::gzclose_r(static_cast<gzFile>(file_));
}

bool LineReader::fill() {
  if (eof_) return false;
  // Keeps the unfinished line at the front.
  buffer_.erase(0, pos_);
  pos_ = 0;
  const size_t have = buffer_.size();
  buffer_.resize(have + kBlock);
  const int got = ::gzread(static_cast<gzFile>(file_), &buffer_[have], kBlock);
  int err = Z_OK;
  const char* message = ::gzerror(static_cast<gzFile>(file_), &err);
  if (got < 0 || (err != Z_OK && err != Z_STREAM_END)) {
    buffer_.resize(have);
    const std::string reason = err == Z_ERRNO ? std::strerror(errno) : message;
    throw Error(path_ + ": cannot read past line " + std::to_string(lines_) + ": " + reason +
                (err == Z_BUF_ERROR ? " (truncated gzip file?)" : ""));
  }
  buffer_.resize(have + static_cast<size_t>(got));
  hash_.update(std::string_view(buffer_.data() + have, static_cast<size_t>(got)));
  if (got == 0) eof_ = true;
  return got > 0;
}

bool LineReader::next(std::string& line) {
  for (;;) {
    const size_t nl = buffer_.find('\n', pos_);
    if (nl != std::string::npos) {
      line.assign(buffer_, pos_, nl - pos_);
      pos_ = nl + 1;
      break;
    }
    if (!fill()) {
      if (pos_ >= buffer_.size()) return false;
      line.assign(buffer_, pos_, std::string::npos);  // a last line without '\n'
      pos_ = buffer_.size();
      break;
    }
  }
  chomp_cr(line);
  ++lines_;
  return true;
}

bool is_gzip_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  unsigned char magic[2] = {0, 0};
  const size_t n = std::fread(magic, 1, 2, f);
  std::fclose(f);
  return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

}  // namespace nmt
