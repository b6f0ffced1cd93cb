// Temporary-file naming, atomic writes and the removal of what an interrupted preparation left.
#include "src/data/temp_files.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>

#include "src/core/error.h"

namespace gdn::data {

namespace {

namespace fs = std::filesystem;

// Whether process `pid` exists (EPERM: it exists but belongs to someone else).
bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(pid_t(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

std::string temp_path_for(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = temp_path_for(path);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    GDN_CHECK(f, "cannot write '", tmp, "'");
    f.write(bytes.data(), std::streamsize(bytes.size()));
    f.flush();
    GDN_CHECK(f, "error writing '", tmp, "'");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    GDN_FAIL("cannot rename '", tmp, "' to '", path, "': ", ec.message());
  }
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

}  // namespace gdn::data
