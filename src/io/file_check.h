// Opening a file to read with an error that names it: a directory given where a file belongs, a
// path that does not exist or cannot be read, are refused up front with the path and what it was
// meant to be ("config", "safetensors file"), instead of surfacing later as libstdc++'s
// "basic_filebuf::underflow" or an empty read.
#pragma once
#include <fstream>
#include <string>

namespace gdn::io {

// Throws gdn::Error: "WHAT 'PATH' does not exist", "WHAT 'PATH' is a directory, not a file",
// "cannot read WHAT 'PATH': <reason>".
void check_readable_file(const std::string& path, const std::string& what);
// The file opened for reading (binary), after check_readable_file.
std::ifstream open_for_reading(const std::string& path, const std::string& what);
// The whole file as bytes; a read error names the path.
std::string read_file(const std::string& path, const std::string& what);

}  // namespace gdn::io
