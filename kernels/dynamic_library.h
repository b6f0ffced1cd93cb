// Vendor libraries that gdn uses where a machine has them (cuDNN, NCCL, NVRTC) are opened at run
// time with dlopen, never linked: a program starts without them, and what needs one says which
// library is missing and why instead of the loader refusing to start the program at all.
// kernels/cuda/cudnn_api.h and src/dist/cuda/nccl_api.h bind their functions through this.
#pragma once
#include <string>
#include <vector>

namespace gdn {

// What `gdn info` and error messages say of an optional library.
struct LibraryInfo {
  std::string name;        // "cuDNN"
  bool available = false;  // opened, every function found, a version gdn can use
  std::string path;        // the file that was opened (empty when none was)
  int version_code = 0;    // major * 10000 + minor * 100 + patch (cuDNN 9, NCCL 2.9+); 0: unknown
  std::string why;         // not available: what failed (dlopen's error, missing functions, ...)
  // "9.10.2 (/usr/lib/libcudnn.so.9)" or "not available: <why>".
  std::string summary() const;
};

// "9.6.0" from a version code major * 10000 + minor * 100 + patch.
std::string version_string(int code);

// Why `info` cannot serve `feature`, which needs version `min_version` or newer; "" when it can:
//   "cuDNN is not available (<why>); <feature> needs cuDNN 9.6.0 or newer"
//   "<feature> needs cuDNN 9.6.0 or newer, found 9.1.0 (<path>)"
std::string why_unusable(const LibraryInfo& info, const std::string& feature, int min_version);

// One shared library, opened on construction by the first of its names that dlopen accepts
// (RTLD_NOW | RTLD_LOCAL). It is never closed: objects the library made (handles, communicators)
// may outlive any owner, up to process exit.
class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  explicit DynamicLibrary(const std::vector<std::string>& names);

  bool is_open() const { return handle_ != nullptr; }
  void* handle() const { return handle_; }
  // Why no name opened: each name with dlopen's message.
  const std::string& error() const { return error_; }
  // The file that was opened, as the dynamic loader resolved it.
  std::string path() const;

  // The symbol's address, or null.
  void* symbol(const char* name) const;
  // fn = the symbol `name` (null, and `name` added to missing(), when the library lacks it).
  template <typename F>
  void bind(F*& fn, const char* name) {
    fn = reinterpret_cast<F*>(symbol(name));
    if (!fn) missing_.push_back(name);
  }
  const std::vector<std::string>& missing() const { return missing_; }
  // "lacks cudnnCreate, cudnnSetStream" (the first three, then a count; empty when none is).
  std::string missing_str() const;

 private:
  void* handle_ = nullptr;
  std::string error_;
  std::vector<std::string> missing_;
};

// A library's function table `Api` and what was found, as a loader fills them once per process.
template <class Api>
struct LoadedLibrary {
  Api api;
  LibraryInfo info;
  const Api* api_or_null() const { return info.available ? &api : nullptr; }
};

// Opens `lib` by the first of `names`, then binds its functions with bind(lib): true when it
// opened and has every one, else false with info.why saying what failed (info.path is the file
// where one opened).
template <class Bind>
bool open_and_bind(DynamicLibrary& lib, LibraryInfo& info, const std::vector<std::string>& names,
                   const Bind& bind) {
  lib = DynamicLibrary(names);
  if (!lib.is_open()) {
    info.why = lib.error();
    return false;
  }
  info.path = lib.path();
  bind(lib);
  if (!lib.missing().empty()) info.why = info.path + " " + lib.missing_str();
  return lib.missing().empty();
}

}  // namespace gdn
