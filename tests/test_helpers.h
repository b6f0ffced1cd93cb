// Helpers shared by the tests that check messages and touch files: the message of a thrown
// gdn::Error, integer views of tensors, temporary directories and whole-file reads and writes.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "src/core/error.h"
#include "src/core/tensor.h"

namespace gdn::test {

// The message of the gdn::Error thrown by fn ("" when nothing is thrown).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const gdn::Error& e) {
    return e.what();
  }
  return "";
}

// The values of an integer tensor.
inline std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> out;
  for (double v : t.to_vector()) out.push_back(int64_t(v));
  return out;
}

// A fresh directory, removed with everything in it at the end of the test. Named after the
// process and a counter, so tests running side by side never share one.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "gdn_test") {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// An empty directory `name` under the system's temporary directory (emptied when it exists);
// left in place after the test, for a look at what it wrote.
inline std::string fresh_dir(const std::string& name) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

// Replaces the file at path with these bytes.
inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// The whole file ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The gdn program beside the test's build directory, or $GDN_BINARY ("" when there is none).
inline std::string gdn_binary() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("GDN_BINARY")) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& p : {self.parent_path().parent_path() / "gdn", self.parent_path() / "gdn"})
    if (fs::is_regular_file(p, ec)) return p.string();
  return "";
}

}  // namespace gdn::test
