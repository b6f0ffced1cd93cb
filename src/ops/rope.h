// Rotary position embedding as a differentiable op over kernels/cpu/rope.h and, on CUDA,
// kernels/cuda/rope_cuda.h (non-interleaved, rotate-half, as fla's RotaryEmbedding):
// x [B, T, H, D] -> x rotated by angle pos * theta^(-2i/D) in each pair (i, i + D/2). Positions
// are derived, not passed: pos = offset + (t - start of t's sequence), start = 0 without
// cu_seqlens. The backward is the rotation by -angle (the autograd op is named "rope" and saves
// nothing). CPU, CUDA (equal to the CPU on an H200: test_cuda_attention) and meta.
#pragma once
#include <vector>

#include "src/core/tensor.h"

namespace gdn::ops {

struct RopeOptions {
  double theta = 10000.0;  // fla's rope_theta
  int64_t offset = 0;      // position of the first token (generation: tokens already seen)
  // Packed sequences (fla's cu_seqlens, B = 1): positions restart at each sequence start.
  std::vector<int64_t> cu_seqlens;
};

// fp32, fp64 or bf16 x (math in fp32, fp64 for fp64); D even.
Tensor rope(const Tensor& x, const RopeOptions& opt = {});

}  // namespace gdn::ops
