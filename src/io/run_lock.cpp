#include "src/io/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "src/core/error.h"

namespace gdn::io {

namespace {

// What the holder wrote: "pid 1234 on host, gdn train" (or "" when it could not be read).
std::string holder_of(int fd) {
  char buf[256] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  std::string s(buf, size_t(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string host_name() {
  char h[256] = {};
  return gethostname(h, sizeof h - 1) == 0 ? std::string(h) : std::string("unknown host");
}

}  // namespace

std::string run_lock_path(const std::string& dir) {
  return (std::filesystem::path(dir) / ".lock").string();
}

std::unique_ptr<RunLock> RunLock::acquire(const std::string& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  GDN_CHECK(!ec, "cannot create the run directory ", dir, ": ", ec.message());
  const std::string path = run_lock_path(dir);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  GDN_CHECK(fd >= 0, "cannot open the run directory's lock ", path, ": ", std::strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = holder_of(fd);
    ::close(fd);
    GDN_CHECK(err == EWOULDBLOCK, "cannot lock the run directory ", dir, " (", path,
              "): ", std::strerror(err));
    GDN_FAIL("the run directory ", dir, " is in use by another process (",
             holder.empty() ? std::string("its pid is not recorded yet") : holder,
             "): one process trains a run at a time. Wait for it to end, or give this one "
             "another train.out_dir");
  }
  // For the message of a process refused later; the lock does not depend on it.
  const std::string me =
      "pid " + std::to_string(::getpid()) + " on " + host_name() + ", " + what + "\n";
  if (ftruncate(fd, 0) == 0) {
    const ssize_t n = pwrite(fd, me.data(), me.size(), 0);
    (void)n;
  }
  return std::unique_ptr<RunLock>(new RunLock(dir, fd));
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace gdn::io
