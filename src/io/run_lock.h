// One process per run directory: an exclusive lock (flock) on DIR/.lock, held for the life of the
// process, taken before anything in the directory is read or written (gdn train, --resume,
// --overwrite, the data preparation of a run). A second process is refused at once, naming the
// directory and the holder's pid and host, which the holder writes into the lock file for that
// message only: the lock itself is the kernel's, so it dies with its process (kill -9 leaves no
// stale lock). Readers (eval, generate) take no lock and never wait.
#pragma once
#include <memory>
#include <string>

namespace gdn::io {

class RunLock {
 public:
  // Locks `dir` (created when missing) for `what` ("gdn train"); throws gdn::Error naming the
  // directory and the holder when another process holds it.
  static std::unique_ptr<RunLock> acquire(const std::string& dir, const std::string& what);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  RunLock(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}
  std::string dir_;
  int fd_ = -1;
};

// The lock file of a run directory.
std::string run_lock_path(const std::string& dir);

}  // namespace gdn::io
