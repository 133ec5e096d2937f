#include "util/line_reader.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/util.h"

namespace nmt {

namespace {
constexpr size_t kBlock = 1 << 20;     // decompressed or plain bytes a fill asks for
constexpr size_t kRawBlock = 1 << 18;  // compressed bytes a read asks for

z_stream* zs(void* p) { return static_cast<z_stream*>(p); }
bool is_gzip_magic(const std::string& b) {
  return b.size() >= 2 && static_cast<unsigned char>(b[0]) == 0x1f &&
         static_cast<unsigned char>(b[1]) == 0x8b;
}
}  // namespace

LineReader::LineReader(const std::string& path) : path_(path) {
  if (path == "-") {
    fd_ = STDIN_FILENO;
    return;
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  own_fd_ = true;
}

LineReader::~LineReader() {
  if (zstream_ != nullptr) {
    ::inflateEnd(zs(zstream_));
    delete zs(zstream_);
  }
  if (own_fd_) ::close(fd_);
}

void LineReader::fail(const std::string& reason) const {
  throw Error(path_ + ": cannot read past line " + std::to_string(lines_) + ": " + reason);
}

size_t LineReader::read_raw(char* dst, size_t n) {
  for (;;) {
    const ssize_t got = ::read(fd_, dst, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) fail(std::strerror(errno));
  }
}

void LineReader::start() {
  started_ = true;
  raw_.resize(kRawBlock);
  size_t have = 0;
  // Two bytes decide, unless the first already says plain text.
  while (have < 2) {
    const size_t got = read_raw(&raw_[have], raw_.size() - have);
    if (got == 0) break;
    have += got;
    if (static_cast<unsigned char>(raw_[0]) != 0x1f) break;
  }
  raw_.resize(have);
  if (!is_gzip_magic(raw_)) return;
  auto* z = new z_stream{};
  if (::inflateInit2(z, 15 + 16) != Z_OK) {  // 16: a gzip wrapper
    delete z;
    fail("zlib cannot start");
  }
  zstream_ = z;
  z->next_in = reinterpret_cast<Bytef*>(&raw_[0]);
  z->avail_in = static_cast<uInt>(have);
  member_open_ = true;
}

// Inflates into buffer_ after `have` bytes until at least one byte comes out or the input ends.
size_t LineReader::inflate_into(size_t have) {
  z_stream* z = zs(zstream_);
  buffer_.resize(have + kBlock);
  z->next_out = reinterpret_cast<Bytef*>(&buffer_[have]);
  z->avail_out = static_cast<uInt>(kBlock);
  while (z->avail_out == kBlock && !gzip_done_) {
    if (z->avail_in == 0) {
      raw_.resize(kRawBlock);
      const size_t n = read_raw(&raw_[0], kRawBlock);
      if (n == 0) {
        if (member_open_) fail("unexpected end of file (truncated gzip file?)");
        gzip_done_ = true;
        break;
      }
      z->next_in = reinterpret_cast<Bytef*>(&raw_[0]);
      z->avail_in = static_cast<uInt>(n);
    }
    if (!member_open_) {
      // After a member: another one, or trailing bytes that are not gzip (ignored).
      if (*z->next_in != 0x1f) {
        gzip_done_ = true;
        break;
      }
      ::inflateReset(z);
      member_open_ = true;
    }
    const int ret = ::inflate(z, Z_NO_FLUSH);
    if (ret == Z_STREAM_END) {
      member_open_ = false;
    } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
      fail(z->msg != nullptr ? z->msg : "damaged gzip data");
    }
  }
  const size_t got = kBlock - z->avail_out;
  buffer_.resize(have + got);
  return got;
}

bool LineReader::fill() {
  if (eof_) return false;
  // Keeps the unfinished line at the front.
  buffer_.erase(0, pos_);
  pos_ = 0;
  const size_t have = buffer_.size();
  if (!started_) start();
  size_t got = 0;
  if (zstream_ != nullptr) {
    got = inflate_into(have);
  } else if (!raw_.empty()) {  // the plain first block start() read
    buffer_ += raw_;
    got = raw_.size();
    std::string().swap(raw_);
  } else {
    buffer_.resize(have + kBlock);
    got = read_raw(&buffer_[have], kBlock);
    buffer_.resize(have + got);
  }
  hash_.update(std::string_view(buffer_.data() + have, got));
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

}  // namespace nmt
