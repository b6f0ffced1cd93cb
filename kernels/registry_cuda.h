// The CUDA kernels a registry entry points to (kernels/gdr_registry.cpp, kernels/kda.cpp): the
// family's cuda_kernels(impl), or null when gdn is built without CUDA.
#pragma once

namespace gdn::delta_rule {

// cuda_kernels is found by argument-dependent lookup in Impl's namespace (gdr::, kda::).
template <class CudaKernels, class Impl>
const CudaKernels* cuda_of(Impl impl) {
#if defined(GDN_WITH_CUDA)
  return &cuda_kernels(impl);
#else
  (void)impl;
  return nullptr;
#endif
}

}  // namespace gdn::delta_rule
