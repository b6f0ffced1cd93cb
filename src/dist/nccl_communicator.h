// The NCCL engine (internal to src/dist; compiled only with CUDA): CUDA tensors of one device,
// one process per GPU, collectives on the communicator's own stream. The unique id travels
// through `host` (the MPI communicator), which also carries barriers and host values. NCCL is
// opened at run time (src/dist/cuda/nccl_api.h): without it the engine is refused by name.
#pragma once
#include <memory>
#include <string>

#include "kernels/dynamic_library.h"
#include "src/dist/communicator.h"

namespace gdn::dist {

// Non-blocking communicators with ncclCommFinalize: NCCL 2.14.
constexpr int kNcclMinVersion = 21400;

// Why dist.backend nccl cannot run with `nccl` (as nccl_info() found it), naming the library and
// the way out; "" when it can.
inline std::string nccl_refusal(const LibraryInfo& nccl) {
  const std::string why = why_unusable(nccl, "dist.backend nccl", kNcclMinVersion);
  if (why.empty()) return "";
  return why +
         ". Install NCCL 2 (libnccl.so.2 where the dynamic loader finds it, e.g. pip's "
         "nvidia-nccl-cu13 with its lib/ folder on LD_LIBRARY_PATH), or train with dist.backend "
         "mpi on train.device cpu";
}

#if defined(GDN_WITH_CUDA)
// NCCL (libnccl.so.2), opened on first use.
LibraryInfo nccl_info();
std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> host,
                                                     Device device, double timeout_s);
#else
inline LibraryInfo nccl_info() {
  LibraryInfo r;
  r.name = "NCCL";
  r.why = "gdn was built without CUDA";
  return r;
}
inline std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator>, Device,
                                                            double) {
  GDN_FAIL("dist.backend nccl: gdn was built without CUDA");
}
#endif

}  // namespace gdn::dist
