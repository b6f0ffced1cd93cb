#include "kernels/dynamic_library.h"

#include <dlfcn.h>
#include <link.h>

namespace gdn {

std::string LibraryInfo::summary() const {
  if (!available) return "not available: " + why;
  std::string s = version_code > 0 ? version_string(version_code) : std::string("version unknown");
  return path.empty() ? s : s + " (" + path + ")";
}

std::string version_string(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

std::string why_unusable(const LibraryInfo& info, const std::string& feature, int min_version) {
  const std::string needs =
      feature + " needs " + info.name + " " + version_string(min_version) + " or newer";
  if (!info.available) return info.name + " is not available (" + info.why + "); " + needs;
  if (info.version_code < min_version)
    return needs + ", found " + version_string(info.version_code) +
           (info.path.empty() ? "" : " (" + info.path + ")");
  return "";
}

DynamicLibrary::DynamicLibrary(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    dlerror();  // clear
    handle_ = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) return;
    const char* e = dlerror();
    error_ += (error_.empty() ? "" : "; ") + (e ? std::string(e) : n + ": dlopen failed");
  }
}

std::string DynamicLibrary::path() const {
  link_map* map = nullptr;
  if (!handle_ || dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return "";
  return map->l_name;
}

void* DynamicLibrary::symbol(const char* name) const {
  return handle_ ? dlsym(handle_, name) : nullptr;
}

std::string DynamicLibrary::missing_str() const {
  constexpr size_t kNamed = 3;  // the rest are counted
  std::string s;
  for (size_t i = 0; i < missing_.size() && i < kNamed; ++i)
    s += (s.empty() ? "lacks " : ", ") + missing_[i];
  if (missing_.size() > kNamed)
    s += " and " + std::to_string(missing_.size() - kNamed) + " more of the functions gdn calls";
  return s;
}

}  // namespace gdn
