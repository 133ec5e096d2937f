// Checked file output. Every open, write, fsync, close, rename and mkdir nmt does for its outputs
// goes through here and either succeeds or throws an Error naming the file and the OS's reason
// ("cannot write F: No space left on device"). A test hook (util/test_hooks.h: NMT_DEBUG_FAIL_IO,
// NMT_DEBUG_IO_TRACE) can make the Nth of these operations fail, so that tests inject a fault at
// every one of them.
#pragma once

#include <cerrno>
#include <cstdint>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

namespace nmt {

// "cannot WHAT PATH: strerror(err)" as an Error.
[[noreturn]] void throw_io_error(const std::string& what, const std::string& path, int err);

// A file opened for writing, with a buffer nmt owns. Each failure throws; after one, the object
// writes nothing more. A destroyed OutFile closes its descriptor unchecked: call close() to
// find out whether the data reached the file.
class OutFile {
 public:
  enum class Mode { kTruncate, kAppend };
  OutFile() = default;
  OutFile(std::string path, Mode mode);
  // Standard output, named "standard output" in errors; close() only flushes it.
  static OutFile standard_output();
  OutFile(OutFile&& other) noexcept;
  OutFile& operator=(OutFile&& other) noexcept;
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  ~OutFile();

  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // Buffered: the data reaches the OS when the buffer fills, at flush() or at close().
  void write(std::string_view data);
  void flush();
  // flush() and fsync: the data is on the disk.
  void sync();
  // flush() and close, both checked.
  void close();

 private:
  void write_through(const char* data, size_t size);
  void release() noexcept;

  int fd_ = -1;
  bool owns_fd_ = true;
  bool failed_ = false;
  std::string path_;
  std::string buffer_;
};

// A std::ostream over an OutFile, for code that writes to streams. A failed write throws the
// OutFile's Error out of the stream operation (badbit is in exceptions()). Call the OutFile's
// close() at the end.
class OutFileStream : public std::ostream {
 public:
  explicit OutFileStream(OutFile& file);

 private:
  class Buf : public std::streambuf {
   public:
    explicit Buf(OutFile& file) : file_(file) {}

   protected:
    int_type overflow(int_type c) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int sync() override;

   private:
    OutFile& file_;
  };
  Buf buf_;
};

// Writes all of text to standard output, checked (a command's result: a report, a config).
void write_standard_output(std::string_view text);
// Writes PATH in place and fsyncs it (for files inside a directory that is renamed whole).
void write_file_synced(const std::string& path, std::string_view content);
// Writes to PATH.tmp-PID, fsyncs, then renames over PATH: readers see the old or the new file,
// never a part. On failure the temporary file is removed and PATH is untouched.
void write_file_atomic(const std::string& path, std::string_view content);
// fsync a directory, so that a rename or a new file inside it is durable.
void fsync_dir(const std::string& path);
// rename(2), checked.
void rename_path(const std::string& from, const std::string& to);
// Swaps two directories atomically where the file system can (renameat2 RENAME_EXCHANGE), so a
// reader always finds one complete directory under `to`; `from` then holds the old one. Where it
// cannot, or `to` does not exist, `to` is replaced by a plain rename (the old one removed first).
void replace_directory(const std::string& from, const std::string& to);
// mkdir -p, checked: a missing or unwritable parent, or a file in the way, names the path.
void create_directories(const std::string& path);
// mkdir -p DIR, then proves that files can be created in it (the error names DIR).
void check_writable_dir(const std::string& dir);
// Refuses, before any work, an output file that cannot be created: a missing parent directory,
// a directory in its place, no permission. Leaves nothing behind.
void check_writable_file(const std::string& path);

// The fault hook for one operation (op: "open", "write", "fsync", ...): 0 to go ahead, or the
// errno it must fail with. Counted and traced as the header says.
int io_fault(const char* op, const std::string& path);

// A syscall's result, or the injected fault (io_fault): -1 with errno set.
template <class Fn>
auto checked_call(const char* op, const std::string& path, Fn&& fn) -> decltype(fn()) {
  if (const int err = io_fault(op, path); err != 0) {
    errno = err;
    return -1;
  }
  return fn();
}

}  // namespace nmt
