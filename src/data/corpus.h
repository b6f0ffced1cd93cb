// The default text corpus: the Python standard library sources, present on every Debian
// machine with python3 (libpython3.X-minimal and -stdlib), so a training run needs no download.
// On Debian 12 (/usr/lib/python3.11): 636 .py files, 10.9 MB (10.4 MiB), mostly English
// identifiers, comments and docstrings.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gdn::data {

struct Corpus {
  std::string name;                // e.g. "python3.11-stdlib"
  std::string root;                // e.g. "/usr/lib/python3.11"
  std::vector<std::string> files;  // sorted absolute paths
  int64_t bytes = 0;               // total size of `files`
};

// The roots tried, newest Python first: /usr/lib/python3.X and /usr/local/lib/python3.X.
std::vector<std::string> default_corpus_candidates();

// Every *.py under the first candidate that holds os.py, skipping site-packages,
// dist-packages, __pycache__ and test directories (whose presence varies between machines).
// Throws a gdn::Error listing the paths tried when none exists.
Corpus find_default_corpus();

}  // namespace gdn::data
