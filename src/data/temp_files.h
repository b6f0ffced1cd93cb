// Temporary files of the data pipeline: every file prepare_data writes (shards, tokenizer,
// meta.json) is written to `NAME.tmp.PID` and renamed, so readers never see half a file. A
// preparation that is killed leaves its temporary files behind; the next one removes them.
#pragma once
#include <string>
#include <vector>

namespace gdn::data {

// The temporary name of `path` for this process: path + ".tmp." + getpid().
std::string temp_path_for(const std::string& path);

// Writes `bytes` to temp_path_for(path), then renames it to `path`.
void write_file_atomic(const std::string& path, const std::string& bytes);

// Removes, in `dir`, each `NAME.tmp.PID` (NAME one of `names`, PID all digits) whose process is
// gone or is this one (a live other process may be writing it), and each `NAME.tmp` (the name
// earlier versions used). Returns the paths removed, sorted.
std::vector<std::string> remove_stale_temp_files(const std::string& dir,
                                                 const std::vector<std::string>& names);

}  // namespace gdn::data
