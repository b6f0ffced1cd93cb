// Causal softmax attention as a differentiable op over the kernels of the attention registry
// (kernels/attention_registry.h: kernels/cpu/attention.h; on CUDA kernels/cuda/attention_cuda.h).
// Layout is flash-attention's / fla's: q [B, T, H, D], k, v [B, T, HKV, D] (H a multiple of HKV:
// grouped-query attention) -> o [B, T, H, D]:
//   o_t = sum_s softmax_s(scale q_t . k_s) v_s over keys first(t) <= s <= t,
// first(t) = sequence start (window 0) or max(start, t - window + 1).
// The autograd op is named "attention"; it saves q, k, v, o and the row log-sum-exp lse
// [B, H, T] (the kernel residual of the memory profile, layers/token_mixer.cpp).
// CPU, CUDA (equal to the CPU on an H200) and meta (shapes only). On CUDA
// bf16 runs cuDNN's fused attention where it supports the problem (kernels/cuda/attention_cudnn.h;
// AttentionOptions::impl), our flash kernel otherwise.
#pragma once
#include <optional>
#include <vector>

#include "kernels/attention_registry.h"
#include "src/core/tensor.h"

namespace gdn::ops {

struct AttentionOptions {
  int64_t window = 0;           // 0: full causal; w: a query sees itself and w - 1 keys before
  std::optional<double> scale;  // default D^-1/2
  // Packed sequences (fla's cu_seqlens, host offsets 0 = cu[0] < ... < cu[N] = T, B = 1): no
  // query sees another sequence's keys. Empty: B rows of T tokens.
  std::vector<int64_t> cu_seqlens;
  // CUDA only: auto (cuDNN where it supports the problem, else our flash kernel), cudnn (an error
  // where it cannot run) or flash (our kernel). Layers pass model.attention_impl.
  attn::Impl impl = attn::Impl::automatic;
};

// The element type the attention registry sizes workspaces and picks kernels by (fp16 included:
// the kernels' dispatch refuses it); another dtype is an error naming it.
attn::SdpaType attention_type(DType dt);

// fp32, fp64 or bf16 inputs of one dtype; the output has their dtype.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttentionOptions& opt = {});

}  // namespace gdn::ops
