// A content hash of files: FNV-1a 64 over their bytes in order, as 16 hex digits. Read in blocks,
// so a model's weights never sit in memory twice. Used where a file's identity is recorded and
// checked later (a data directory's tokenizer file, the weights a run started from).
#pragma once
#include <string>
#include <vector>

namespace gdn::io {

// Errors name the file that cannot be read.
std::string content_hash(const std::vector<std::string>& paths);

}  // namespace gdn::io
