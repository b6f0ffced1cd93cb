// The CUDA side of the Kimi Delta Attention registry (kernels/kda.h: cuda_kernels): each
// implementation's kernels (kernels/cuda/kda_recurrent.cu, kernels/cuda/kda_chunked.cu) with
// their workspace sizes. Both keep the same residual (the chunk-start states), as on the CPU.
#include "kernels/cuda/kda_cuda.h"

namespace gdn::kda {

#define GDN_KDA_CUDA_KERNELS(NAME)                                                       \
  CudaKernels {                                                                          \
    {{&cuda_detail::NAME##_forward<float>, &cuda_detail::NAME##_backward<float>},        \
     {&cuda_detail::NAME##_forward<double>, &cuda_detail::NAME##_backward<double>},      \
     {&cuda_detail::NAME##_forward<bf16>, &cuda_detail::NAME##_backward<bf16>}},         \
        &cuda_detail::NAME##_forward_workspace, &cuda_detail::NAME##_backward_workspace, \
        /*packed=*/true                                                                  \
  }

const CudaKernels& cuda_kernels(Impl impl) {
  static const CudaKernels recurrent = GDN_KDA_CUDA_KERNELS(recurrent);
  static const CudaKernels chunked = GDN_KDA_CUDA_KERNELS(chunked);
  return impl == Impl::chunked ? chunked : recurrent;
}

#undef GDN_KDA_CUDA_KERNELS

}  // namespace gdn::kda
