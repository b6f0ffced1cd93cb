// Checked and atomic file writes on POSIX file descriptors (every write, fsync, close and rename
// result is checked; EINTR is retried, short writes are continued).
#include "src/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "src/core/error.h"

namespace gdn::io {

namespace {

std::string reason(int err) {
  return std::strerror(err);
}

// Writes all n bytes; returns 0 or the errno of the failing write.
int write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;  // no progress: never loop forever
    data += w;
    n -= size_t(w);
  }
  return 0;
}

// Makes a rename in `dir` durable; best effort (some file systems refuse fsync on directories).
void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  // A stale temporary (a crash, or anything else at that name) is never written through.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT && errno != EISDIR && errno != EPERM)
    GDN_FAIL("cannot write ", path, ": cannot remove the stale ", tmp, ": ", reason(errno));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) GDN_FAIL("cannot write ", path, ": cannot create ", tmp, ": ", reason(errno));
  int err = write_all(fd, bytes.data(), bytes.size());
  const char* step = "writing";
  if (err == 0 && ::fsync(fd) != 0) {
    err = errno;
    step = "flushing";
  }
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    step = "closing";
  }
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    step = "renaming";
  }
  if (err != 0) {
    ::unlink(tmp.c_str());  // the old file stays as it was
    GDN_FAIL("cannot write ", path, ": ", step, " ", tmp, " failed: ", reason(err),
             "; the previous ", path, " (if any) is unchanged");
  }
  sync_directory(std::filesystem::path(path).parent_path().string());
}

std::string read_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) GDN_FAIL("cannot read ", path, ": ", reason(errno));
  GDN_CHECK(S_ISREG(st.st_mode), "cannot read ", path, ": not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) GDN_FAIL("cannot read ", path, ": ", reason(errno));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      GDN_FAIL("cannot read ", path, ": ", reason(err));
    }
    if (r == 0) break;
    out.append(buf, size_t(r));
  }
  ::close(fd);
  return out;
}

AppendFile::AppendFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) GDN_FAIL("cannot open ", path, " for appending: ", reason(errno));
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(const std::string& bytes) {
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  const int err = write_all(fd_, bytes.data(), bytes.size());
  if (err == 0) return;
  // Cut a partial record back off (fails harmlessly on devices and pipes).
  [[maybe_unused]] const bool cut = before >= 0 && ::ftruncate(fd_, before) == 0;
  GDN_FAIL("cannot write ", path_, ": ", reason(err));
}

}  // namespace gdn::io
