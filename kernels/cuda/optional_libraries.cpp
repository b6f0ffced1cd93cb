// cuDNN and NVRTC opened at run time (optional_libraries.h, cudnn_api.h): once per process, on
// first use, from the names the dynamic loader resolves (LD_LIBRARY_PATH, the ld.so cache), never
// a path of the build machine.
#include "kernels/cuda/optional_libraries.h"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/cudnn_api.h"

namespace gdn::cuda {

namespace {

using LoadedCudnn = LoadedLibrary<CudnnApi>;

LoadedCudnn load_cudnn() {
  LoadedCudnn r;
  r.info.name = "cuDNN";
  DynamicLibrary lib;
  const auto bind = [&](DynamicLibrary& l) {
#define GDN_CUDNN_BIND(fn) l.bind(r.api.fn, #fn);
    GDN_CUDNN_FUNCTIONS(GDN_CUDNN_BIND)
#undef GDN_CUDNN_BIND
  };
  if (!open_and_bind(lib, r.info, {"libcudnn.so.9"}, bind)) return r;
  r.info.version_code = int(r.api.cudnnGetVersion());
  if (r.info.version_code / 10000 != kCudnnMinVersion / 10000) {
    r.info.why = r.info.path + " is cuDNN " + version_string(r.info.version_code) +
                 "; gdn was built for cuDNN " + std::to_string(kCudnnMinVersion / 10000);
    return r;
  }
  r.api.handle = lib.handle();
  r.api.version = r.info.version_code;
  r.info.available = true;
  return r;
}

const LoadedCudnn& loaded_cudnn() {
  static const LoadedCudnn loaded = load_cudnn();  // thread-safe, once
  return loaded;
}

}  // namespace

LibraryInfo cudnn_info() {
  return loaded_cudnn().info;
}

const CudnnApi* cudnn_api_or_null() {
  return loaded_cudnn().api_or_null();
}

const CudnnApi& cudnn(const char* what) {
  if (const CudnnApi* api = cudnn_api_or_null()) return *api;
  throw std::runtime_error(why_unusable(cudnn_info(), what, kCudnnMinVersion));
}

std::string cudnn_missing_for(const char* feature, int min_version) {
  return why_unusable(cudnn_info(), feature, min_version);
}

LibraryInfo nvrtc_info() {
  static const LibraryInfo info = [] {
    LibraryInfo r;
    r.name = "NVRTC";
    const std::string soname = "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000);
    DynamicLibrary lib;
    int (*nvrtc_version)(int*, int*) = nullptr;  // nvrtcResult nvrtcVersion(int*, int*)
    const auto bind = [&](DynamicLibrary& l) { l.bind(nvrtc_version, "nvrtcVersion"); };
    if (!open_and_bind(lib, r, {soname}, bind)) return r;
    int major = 0, minor = 0;
    if (nvrtc_version(&major, &minor) != 0) {
      r.why = r.path + ": nvrtcVersion failed";
      return r;
    }
    r.version_code = major * 10000 + minor * 100;
    r.available = true;
    return r;
  }();
  return info;
}

}  // namespace gdn::cuda
