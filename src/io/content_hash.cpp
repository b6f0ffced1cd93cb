// A content hash of files (content_hash.h).
#include "src/io/content_hash.h"

#include <cstdint>
#include <cstdio>
#include <fstream>

#include "src/core/error.h"

namespace gdn::io {

std::string content_hash(const std::vector<std::string>& paths) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64: offset basis, then x prime per byte
  std::vector<char> block(size_t(1) << 20);
  for (const std::string& path : paths) {
    std::ifstream f(path, std::ios::binary);
    GDN_CHECK(f, "cannot read '", path, "'");
    while (f) {
      f.read(block.data(), std::streamsize(block.size()));
      const size_t n = size_t(f.gcount());
      for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(block[i])) * 1099511628211ull;
    }
    GDN_CHECK(f.eof(), "reading '", path, "' failed");
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return hex;
}

}  // namespace gdn::io
