// The CUDA attention tests' shared pieces (tests/test_cuda_attention.cpp,
// test_cuda_attention_cudnn.cpp): the two devices, the CUDA attention kernels' headers, and one
// problem's inputs q, k, v, dO and outputs o, lse, dq, dk, dv.
#pragma once
#if defined(GDN_WITH_CUDA)
#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/attention_cudnn.h"
#include "src/core/cuda/cuda_context.h"
#include "src/ops/ops.h"

namespace gdn::test::cuda_attention {

inline const Device kCuda = Device::cuda(0);
inline const Device kCpu = Device::cpu();

struct Outputs {
  Tensor o, lse, dq, dk, dv;  // on the CPU
};

struct Inputs {
  Tensor q, k, v, d_o;  // on the CPU
};

// Random inputs of dtype dt for p, on the CPU.
inline Inputs inputs_for(const attn::Problem& p, DType dt) {
  return {ops::randn({p.B, p.T, p.H, p.D}, dt), ops::randn({p.B, p.T, p.HKV, p.D}, dt),
          ops::randn({p.B, p.T, p.HKV, p.D}, dt), ops::randn({p.B, p.T, p.H, p.D}, dt)};
}

}  // namespace gdn::test::cuda_attention
#endif
