// NCCL opened at run time (nccl_api.h): once per process, on first use, by the name the dynamic
// loader resolves (LD_LIBRARY_PATH, the ld.so cache).
#include "src/dist/cuda/nccl_api.h"

#include "src/dist/nccl_communicator.h"

namespace gdn::dist {

namespace {

using LoadedNccl = LoadedLibrary<NcclApi>;

LoadedNccl load_nccl() {
  LoadedNccl r;
  r.info.name = "NCCL";
  DynamicLibrary lib;
  const auto bind = [&](DynamicLibrary& l) {
#define GDN_NCCL_BIND(fn) l.bind(r.api.fn, #fn);
    GDN_NCCL_FUNCTIONS(GDN_NCCL_BIND)
#undef GDN_NCCL_BIND
  };
  if (!open_and_bind(lib, r.info, {"libnccl.so.2"}, bind)) return r;
  int version = 0;
  if (r.api.ncclGetVersion(&version) != ncclSuccess) {
    r.info.why = r.info.path + ": ncclGetVersion failed";
    return r;
  }
  r.info.version_code = version;
  if (version < kNcclMinVersion) {
    r.info.why = r.info.path + " is NCCL " + version_string(version) + ", gdn needs " +
                 version_string(kNcclMinVersion) + " or newer";
    return r;
  }
  r.info.available = true;
  return r;
}

const LoadedNccl& loaded_nccl() {
  static const LoadedNccl loaded = load_nccl();  // thread-safe, once
  return loaded;
}

}  // namespace

LibraryInfo nccl_info() {
  return loaded_nccl().info;
}

const NcclApi* nccl_api_or_null() {
  return loaded_nccl().api_or_null();
}

}  // namespace gdn::dist
