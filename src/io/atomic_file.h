// Checked file writes for run directories: a whole-file replace that is atomic (temporary file,
// written, flushed to disk and closed with every result checked, then renamed over the target)
// and an append-only file whose every write is checked. A failure throws a gdn::Error naming
// the file and the reason (e.g. "No space left on device") and never leaves a good file
// replaced by a partial one.
#pragma once
#include <string>
#include <vector>

namespace gdn::io {

// The temporary name of `path` for this process: path + ".tmp." + getpid(). Unique per process,
// so two writers of one file never write through each other's temporary.
std::string temp_path_for(const std::string& path);

// Removes, in `dir`, each `NAME.tmp.PID` (NAME one of `names`, PID all digits) whose process is
// gone or is this one (a live other process may be writing it), and each `NAME.tmp` (the name
// earlier versions used). Returns the paths removed, sorted.
std::vector<std::string> remove_stale_temp_files(const std::string& dir,
                                                 const std::vector<std::string>& names);

// Replaces `path` by `bytes`: written to temp_path_for(path) (any stale one removed first;
// created afresh, never through a link), fsync'ed and closed, then renamed over `path`. On any
// failure the temporary file is removed and `path` is left as it was.
void write_file_atomic(const std::string& path, const std::string& bytes);

// The whole of a regular file; errors name the file (missing, not a regular file, unreadable).
std::string read_regular_file(const std::string& path);

// A file opened for appending (created when missing). append() writes all of its bytes or
// throws naming the file; a failed append is cut back off the file where the file system
// allows, so the file never ends in a torn record.
class AppendFile {
 public:
  explicit AppendFile(const std::string& path);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  void append(const std::string& bytes);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace gdn::io
