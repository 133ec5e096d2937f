#include "util/lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/io.h"
#include "util/util.h"

namespace nmt {

DirLock::DirLock(const std::string& dir, const std::string& who, bool wait) {
  const std::string path = dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io_error("write", dir, errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[256] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    if (err != EWOULDBLOCK) {
      ::close(fd_);
      fd_ = -1;
      throw_io_error("lock", path, err);
    }
    // "PID WHO": written by the holder right after it took the lock.
    std::string holder = trim(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0));
    const auto space = holder.find(' ');
    const std::string pid = holder.substr(0, space);
    const std::string by = space == std::string::npos ? who : holder.substr(space + 1);
    const std::string in_use =
        dir + " is in use by " + by + " (pid " + (pid.empty() ? "unknown" : pid) + ")";
    if (!wait || ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
      throw Error(in_use);
    }
  }
  const std::string text = std::to_string(::getpid()) + " " + who + "\n";
  const auto rc = checked_call("write", path, [&] {
    return ::ftruncate(fd_, 0) == 0 ? ::pwrite(fd_, text.data(), text.size(), 0) : ssize_t{-1};
  });
  if (rc != static_cast<ssize_t>(text.size())) {
    const int err = rc < 0 ? errno : ENOSPC;
    ::close(fd_);
    fd_ = -1;
    throw_io_error("write", path, err);
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays, empty of meaning
}

namespace {

// Who holds an flock on the file open as `fd`: "pid N (COMMAND)" from /proc/locks and
// /proc/N/comm, or "another process" where they cannot be read.
std::string flock_holder(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "another process";
  std::ifstream locks("/proc/locks");
  std::string line;
  char want[64];
  std::snprintf(want, sizeof want, ":%llu", static_cast<unsigned long long>(st.st_ino));
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 4242 fe:01:1234 0 EOF": pid, then major:minor:inode.
    std::istringstream fields(line);
    std::string n, kind, mode, access, pid, id;
    fields >> n >> kind >> mode >> access >> pid >> id;
    if (kind != "FLOCK" || id.size() < std::strlen(want) ||
        id.compare(id.size() - std::strlen(want), std::string::npos, want) != 0)
      continue;
    std::ifstream comm_file("/proc/" + pid + "/comm");
    std::string comm;
    std::getline(comm_file, comm);
    return "pid " + pid + (comm.empty() ? "" : " (" + comm + ")");
  }
  return "another process";
}

}  // namespace

FileLock::FileLock(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io_error("write", path, errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int err = errno;
  const std::string holder = err == EWOULDBLOCK ? flock_holder(fd_) : "";
  ::close(fd_);
  fd_ = -1;
  if (err != EWOULDBLOCK) throw_io_error("lock", path, err);
  throw Error(path + " is being written by " + holder +
              ": two jobs must not write one file; wait for it to end, or give another output");
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace nmt
