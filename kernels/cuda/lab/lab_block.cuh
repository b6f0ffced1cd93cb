// The kernel lab's experimental block code: the `lab` variant of gdr_lab runs this through the
// library's launch path (gdr_fused_launch.cuh) next to the library's own kernels.
//
// To try an idea without touching the library: copy kernels/cuda/gdr_fused_block.h into this folder
// (say as fused_block_next.h, namespace gdn::gdr::lab), include it below instead of the library's,
// point LabBlock at its forward_block / backward_block, and run
//   build/gdr_lab --variants fused,lab --check cpu
// which checks both against the fp64 reference and times them side by side. When `lab` wins and
// passes, move the change into gdr_fused_block.h (and its emulator test runs it on the CPU).
#pragma once
#include "kernels/cuda/gdr_fused_launch.cuh"

namespace gdn::gdr::lab {

struct LabBlock {
  template <typename T, class Exec>
  __device__ __forceinline__ static void forward(const Exec& ex, const fused::Dims& d,
                                                 const fused::ForwardArgs<T>& args, acc_t<T>* sm,
                                                 int64_t block) {
    fused::forward_block<T>(ex, d, args, sm, block);
  }
  template <typename T, class Exec>
  __device__ __forceinline__ static void backward(const Exec& ex, const fused::Dims& d,
                                                  const fused::BackwardArgs<T>& args,
                                                  acc_t<T>* sm) {
    fused::backward_block<T>(ex, d, args, sm);
  }
};

}  // namespace gdn::gdr::lab
