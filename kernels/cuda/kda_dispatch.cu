// The CUDA side of the Kimi Delta Attention registry (kernels/kda.h: cuda_kernels): each
// implementation's CUDA kernels with the registry's signatures and their workspace sizes.
#include "kernels/kda.h"

namespace gdn::kda {

namespace {
int64_t no_workspace(const Problem&, int64_t) {
  return 0;
}
}  // namespace

const CudaKernels& cuda_kernels(Impl) {
  static const CudaKernels none{{}, &no_workspace, &no_workspace};
  return none;
}

}  // namespace gdn::kda
