// Finds the default corpus (see corpus.h). The file list is sorted, so the corpus, and with it
// the prepared shards, are the same on every machine with the same Python version.
#include "src/data/corpus.h"

#include <algorithm>
#include <filesystem>

#include "src/core/error.h"

namespace gdn::data {

namespace fs = std::filesystem;

std::vector<std::string> default_corpus_candidates() {
  std::vector<std::string> roots;
  for (int minor = 20; minor >= 6; --minor) {
    roots.push_back("/usr/lib/python3." + std::to_string(minor));
    roots.push_back("/usr/local/lib/python3." + std::to_string(minor));
  }
  return roots;
}

Corpus find_default_corpus() {
  const auto roots = default_corpus_candidates();
  for (const auto& root : roots) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(root) / "os.py", ec)) continue;
    Corpus c;
    c.root = root;
    c.name = fs::path(root).filename().string() + "-stdlib";
    std::error_code walk_ec;  // separate: a failed query on one entry must not end the walk
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied,
                                        walk_ec);
    for (; !walk_ec && it != fs::recursive_directory_iterator(); it.increment(walk_ec)) {
      const fs::path& p = it->path();
      const std::string name = p.filename().string();
      if (it->is_directory(ec)) {
        if (name == "site-packages" || name == "dist-packages" || name == "__pycache__" ||
            name == "test" || name == "tests" || name == "idle_test")
          it.disable_recursion_pending();
        continue;
      }
      if (p.extension() != ".py" || !it->is_regular_file(ec)) continue;
      const auto size = it->file_size(ec);
      if (ec) continue;
      c.files.push_back(p.string());
      c.bytes += int64_t(size);
    }
    if (c.files.empty()) continue;
    std::sort(c.files.begin(), c.files.end());
    return c;
  }
  std::string tried;
  for (const auto& r : roots) tried += (tried.empty() ? "" : ", ") + r;
  GDN_FAIL("no default corpus: none of the Python standard library directories exists (tried ",
           tried, "); install python3 (apt-get install python3) or pass --input");
}

}  // namespace gdn::data
