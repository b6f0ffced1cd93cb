// The fused kernels' __global__ functions and launches, templated on the block code (a policy
// with static forward / backward), so the library (gdr_fused.cu, fused::LibraryBlock) and the
// kernel lab (kernels/cuda/lab/) instantiate the same launch path with different block code.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/gdr_fused_block.h"
#include "kernels/cuda/launch_math.h"

namespace gdn::gdr::fused {

// The library's block code (gdr_fused_block.h).
struct LibraryBlock {
  template <typename T, class Exec>
  __device__ __forceinline__ static void forward(const Exec& ex, const Dims& d,
                                                 const ForwardArgs<T>& args, acc_t<T>* sm,
                                                 int64_t block) {
    forward_block<T>(ex, d, args, sm, block);
  }
  template <typename T, class Exec>
  __device__ __forceinline__ static void backward(const Exec& ex, const Dims& d,
                                                  const BackwardArgs<T>& args, acc_t<T>* sm) {
    backward_block<T>(ex, d, args, sm);
  }
};

template <class Block, typename T>
__global__ void __launch_bounds__(kThreads, 1) forward_kernel(Dims d, ForwardArgs<T> args) {
  extern __shared__ __align__(16) unsigned char smem[];
  Block::template forward<T>(cuda::BlockExec::device(), d, args, reinterpret_cast<acc_t<T>*>(smem),
                             blockIdx.x);
}

template <class Block, typename T>
__global__ void __launch_bounds__(kThreads, 1) backward_kernel(Dims d, BackwardArgs<T> args) {
  extern __shared__ __align__(16) unsigned char smem[];
  Block::template backward<T>(cuda::BlockExec::device(), d, args,
                              reinterpret_cast<acc_t<T>*>(smem));  // its place: by ticket
}

template <typename Kernel>
void allow_smem(Kernel kernel, int64_t bytes) {
  GDN_KCUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// One forward over every block of the plan.
template <class Block, typename T>
void launch_forward(const Plan& pl, const Dims& d, const ForwardArgs<T>& args,
                    cudaStream_t stream) {
  allow_smem(forward_kernel<Block, T>, pl.smem_bytes);
  forward_kernel<Block, T>
      <<<unsigned(pl.blocks), kThreads, size_t(pl.smem_bytes), stream>>>(d, args);
  GDN_KCUDA_LAUNCHED("gdr fused forward");
}

// One backward: the flags and the ticket counter zeroed, then the blocks, which sum dq, dk, dg,
// dbeta through the workspace and write the gradients (gdr_fused_block.h).
template <class Block, typename T>
void launch_backward(const Plan& pl, const Dims& d, const BackwardArgs<T>& args,
                     cudaStream_t stream) {
  const BackwardWorkspace w(d, sizeof(acc_t<T>));
  GDN_KCUDA_CHECK(cudaMemsetAsync(args.workspace + w.flags, 0, size_t(w.flag_words) * 4, stream));
  allow_smem(backward_kernel<Block, T>, pl.smem_bytes);
  backward_kernel<Block, T>
      <<<unsigned(pl.blocks), kThreads, size_t(pl.smem_bytes), stream>>>(d, args);
  GDN_KCUDA_LAUNCHED("gdr fused backward");
}

}  // namespace gdn::gdr::fused
