// Checked opening of files to read.
#include "src/io/file_check.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>

#include "src/core/error.h"

namespace gdn::io {

namespace fs = std::filesystem;

void check_readable_file(const std::string& path, const std::string& what) {
  GDN_CHECK(!path.empty(), "no ", what, " given (an empty path)");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  GDN_CHECK(st.type() != fs::file_type::not_found, what, " '", path, "' does not exist");
  GDN_CHECK(!ec, "cannot read ", what, " '", path, "': ", ec.message());
  GDN_CHECK(st.type() != fs::file_type::directory, what, " '", path,
            "' is a directory, not a file");
  // Permissions and the like: only an actual open tells.
  std::ifstream f(path, std::ios::binary);
  GDN_CHECK(f.is_open(), "cannot read ", what, " '", path, "': ", std::strerror(errno));
}

std::ifstream open_for_reading(const std::string& path, const std::string& what) {
  check_readable_file(path, what);
  std::ifstream f(path, std::ios::binary);
  GDN_CHECK(f.is_open(), "cannot read ", what, " '", path, "': ", std::strerror(errno));
  return f;
}

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream f = open_for_reading(path, what);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  GDN_CHECK(!f.bad(), "error reading ", what, " '", path, "'");
  return s;
}

}  // namespace gdn::io
