// The NCCL engine (internal to src/dist; compiled only with CUDA): CUDA tensors of one device,
// one process per GPU, collectives on the communicator's own stream. The unique id travels
// through `host` (the MPI communicator), which also carries barriers and host values.
#pragma once
#include <memory>

#include "src/dist/communicator.h"

namespace gdn::dist {

#if defined(GDN_WITH_CUDA)
std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> host,
                                                     Device device, double timeout_s);
#else
inline std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator>, Device,
                                                            double) {
  GDN_FAIL("dist.backend nccl: gdn was built without CUDA");
}
#endif

}  // namespace gdn::dist
