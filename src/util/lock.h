// Exclusive advisory locks that keep two processes off one run directory or one output file.
// The kernel drops them when the process dies, however it dies, so no lock is ever stale.
#pragma once

#include <string>

namespace nmt {

// An exclusive lock on DIR/.lock (flock) for this object's life. The kernel drops it when the
// process dies, however it dies, so no lock is ever stale. The file holds the holder's pid.
class DirLock {
 public:
  // Throws "DIR is in use by WHO (pid N)" when another process holds it (with `wait`: says so
  // in the log and waits for it instead), and names DIR when the lock file cannot be created (a
  // missing or unwritable directory).
  DirLock(const std::string& dir, const std::string& who, bool wait = false);
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

 private:
  int fd_ = -1;
};

// An exclusive advisory lock (flock) on an output file for this object's life, so that two jobs
// never write one file at once (a job started twice, a --resume while the first still runs). The
// file is created when missing and never truncated here; the kernel drops the lock when the
// process dies, however it dies.
class FileLock {
 public:
  // Throws "PATH is being written by pid N (COMMAND)" when another open file holds the lock
  // (the holder read from /proc/locks), and names PATH when it cannot be opened.
  explicit FileLock(const std::string& path);
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  int fd_ = -1;
};

}  // namespace nmt
