// Checked and atomic file writes on POSIX file descriptors (every write, fsync, close and rename
// result is checked; EINTR is retried, short writes are continued).
#include "src/io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "src/core/error.h"

namespace gdn::io {

namespace fs = std::filesystem;

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

// Whether process `pid` exists (EPERM: it exists but belongs to someone else).
bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(pid_t(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

std::string temp_path_for(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

std::vector<std::string> remove_stale_temp_files(const std::string& dir,
                                                 const std::vector<std::string>& names) {
  std::vector<std::string> removed;
  const std::set<std::string> wanted(names.begin(), names.end());
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    const size_t at = file.rfind(".tmp");
    if (at == std::string::npos || !wanted.count(file.substr(0, at))) continue;
    const std::string suffix = file.substr(at + 4);  // "" or ".PID"
    if (!suffix.empty()) {
      const std::string pid = suffix.substr(1);
      if (suffix[0] != '.' || pid.empty() || pid.size() > 9 ||
          !std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }))
        continue;
      const long p = std::stol(pid);
      if (p != long(::getpid()) && process_alive(p)) continue;
    }
    std::error_code rm;
    if (it->is_regular_file(rm) && fs::remove(it->path(), rm))
      removed.push_back(it->path().string());
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = temp_path_for(path);
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
  GDN_CHECK(!S_ISDIR(st.st_mode), "cannot read ", path, ": it is a directory, not a file");
  GDN_CHECK(S_ISREG(st.st_mode), "cannot read ", path,
            ": not a regular file (a pipe, socket or device: copy the data to a file)");
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
