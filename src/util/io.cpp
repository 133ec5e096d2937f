#include "util/io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "util/test_hooks.h"
#include "util/util.h"

namespace nmt {

namespace fs = std::filesystem;

void throw_io_error(const std::string& what, const std::string& path, int err) {
  throw Error("cannot " + what + " " + path + ": " + std::strerror(err));
}

namespace {

// The trace file, opened once.
int trace_fd() {
  static const int fd = test_hooks().io_trace.empty()
                            ? -1
                            : ::open(test_hooks().io_trace.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  return fd;
}

std::atomic<int64_t> g_operations{0};

}  // namespace

int io_fault(const char* op, const std::string& path) {
  const TestHooks& hooks = test_hooks();
  if (hooks.fail_io_at == 0 && hooks.io_trace.empty()) return 0;
  const int64_t n = ++g_operations;
  if (trace_fd() >= 0) {
    const std::string line = std::to_string(n) + " " + op + " " + path + "\n";
    [[maybe_unused]] const auto ignored = ::write(trace_fd(), line.data(), line.size());
  }
  return n == hooks.fail_io_at ? hooks.fail_io_errno : 0;
}

namespace {
// Large enough that a checkpoint file goes out in a few writes, small enough not to matter.
constexpr size_t kBufferSize = size_t{1} << 20;
}  // namespace

OutFile::OutFile(std::string path, Mode mode) : path_(std::move(path)) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == Mode::kAppend ? O_APPEND : O_TRUNC);
  fd_ = checked_call("open", path_, [&] { return ::open(path_.c_str(), flags, 0644); });
  if (fd_ < 0) throw_io_error("write", path_, errno);
}

OutFile OutFile::standard_output() {
  OutFile f;
  f.fd_ = STDOUT_FILENO;
  f.owns_fd_ = false;
  f.path_ = "standard output";
  return f;
}

OutFile::OutFile(OutFile&& other) noexcept { *this = std::move(other); }

OutFile& OutFile::operator=(OutFile&& other) noexcept {
  if (this == &other) return *this;
  release();
  fd_ = other.fd_;
  owns_fd_ = other.owns_fd_;
  failed_ = other.failed_;
  path_ = std::move(other.path_);
  buffer_ = std::move(other.buffer_);
  other.fd_ = -1;
  return *this;
}

OutFile::~OutFile() { release(); }

void OutFile::release() noexcept {
  if (fd_ >= 0 && owns_fd_) ::close(fd_);
  fd_ = -1;
}

void OutFile::write_through(const char* data, size_t size) {
  if (failed_ || fd_ < 0) throw Error("cannot write " + path_ + ": the file is closed");
  while (size > 0) {
    const ssize_t w = checked_call("write", path_, [&] { return ::write(fd_, data, size); });
    if (w < 0) {
      if (errno == EINTR) continue;
      failed_ = true;
      throw_io_error("write", path_, errno);
    }
    data += w;
    size -= static_cast<size_t>(w);
  }
}

void OutFile::write(std::string_view data) {
  if (buffer_.size() + data.size() <= kBufferSize) {
    buffer_.append(data);
    return;
  }
  flush();
  if (data.size() >= kBufferSize) {
    write_through(data.data(), data.size());
  } else {
    buffer_.assign(data);
  }
}

void OutFile::flush() {
  if (buffer_.empty()) return;
  const std::string pending = std::move(buffer_);
  buffer_.clear();
  write_through(pending.data(), pending.size());
}

void OutFile::sync() {
  flush();
  if (checked_call("fsync", path_, [&] { return ::fsync(fd_); }) != 0) {
    failed_ = true;
    throw_io_error("sync", path_, errno);
  }
}

void OutFile::close() {
  flush();
  if (!owns_fd_) return;
  const int fd = fd_;
  fd_ = -1;
  // close(2) reports write errors the file system deferred (NFS, quotas): it is a write.
  if (checked_call("close", path_, [&] { return ::close(fd); }) != 0) {
    failed_ = true;
    throw_io_error("write", path_, errno);
  }
}

OutFileStream::OutFileStream(OutFile& file) : std::ostream(nullptr), buf_(file) {
  rdbuf(&buf_);
  exceptions(std::ios::badbit);
}

OutFileStream::Buf::int_type OutFileStream::Buf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  const char ch = traits_type::to_char_type(c);
  file_.write({&ch, 1});
  return c;
}

std::streamsize OutFileStream::Buf::xsputn(const char* s, std::streamsize n) {
  file_.write({s, static_cast<size_t>(n)});
  return n;
}

int OutFileStream::Buf::sync() {
  file_.flush();
  return 0;
}

void write_standard_output(std::string_view text) {
  OutFile out = OutFile::standard_output();
  out.write(text);
  out.close();
}

void write_file_synced(const std::string& path, std::string_view content) {
  OutFile out(path, OutFile::Mode::kTruncate);
  out.write(content);
  out.sync();
  out.close();
}

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    write_file_synced(tmp, content);
    rename_path(tmp, path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  const auto parent = fs::path(path).parent_path();
  fsync_dir(parent.empty() ? "." : parent.string());
}

void fsync_dir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // a directory nmt cannot open it did not write into either
  const int rc = checked_call("fsync", path, [&] { return ::fsync(fd); });
  const int err = errno;
  ::close(fd);
  // Some file systems cannot sync a directory (EINVAL); durability there is theirs to give.
  if (rc != 0 && err != EINVAL) throw_io_error("sync directory", path, err);
}

void rename_path(const std::string& from, const std::string& to) {
  if (checked_call("rename", to, [&] { return std::rename(from.c_str(), to.c_str()); }) != 0)
    throw Error("cannot rename " + from + " to " + to + ": " + std::strerror(errno));
}

void replace_directory(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::exists(to, ec)) {
    rename_path(from, to);
    return;
  }
  const int rc = checked_call("rename", to, [&] {
    return ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE);
  });
  if (rc != 0 && errno != EINVAL && errno != ENOSYS)
    throw Error("cannot rename " + from + " to " + to + ": " + std::strerror(errno));
  if (rc != 0) {
    // No atomic exchange on this file system: for a moment there is no `to`.
    fs::remove_all(to, ec);
    rename_path(from, to);
    return;
  }
  fs::remove_all(from, ec);  // the old directory; a leftover is only disk space
}

void create_directories(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return;
  if (fs::exists(path, ec)) throw_io_error("create directory", path, ENOTDIR);
  if (const int err = io_fault("mkdir", path); err != 0)
    throw_io_error("create directory", path, err);
  fs::create_directories(path, ec);
  if (ec) throw_io_error("create directory", path, ec.value());
}

namespace {
// Creates and removes PATH (which must not exist): 0, or the errno that refused it.
int probe_create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  ::unlink(path.c_str());
  return 0;
}
}  // namespace

void check_writable_dir(const std::string& dir) {
  create_directories(dir);
  if (const int err = probe_create(dir + "/.tmp-probe-" + std::to_string(::getpid())); err != 0)
    throw_io_error("write in", dir, err);
}

void check_writable_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw_io_error("write", path, EISDIR);
  if (!fs::exists(path, ec)) {
    if (const int err = probe_create(path + ".tmp-" + std::to_string(::getpid())); err != 0)
      throw_io_error("write", path, err);
    return;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);  // no O_TRUNC: the file stays
  if (fd < 0) throw_io_error("write", path, errno);
  ::close(fd);
}

}  // namespace nmt
