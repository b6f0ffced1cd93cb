// Kimi Delta Attention (fla's `kda`) as a differentiable op: a custom autograd Function over the
// kernels of kernels/kda.h. Layout is fla's: q, k [B, T, H, K], v [B, T, HV, V], g [B, T, HV, K]
// (per-channel log decay), beta [B, T, HV], h0 [N, HV, K, V]; returns o [B, T, HV, V] and, when
// asked, ht [N, HV, K, V]. N = B, or with cu_seqlens (B = 1) the number of packed sequences.
#pragma once
#include <optional>
#include <vector>

#include "kernels/kda.h"
#include "src/core/tensor.h"

namespace gdn::ops {

struct KdaOptions {
  kda::Impl impl = kda::Impl::chunked;
  int chunk_size = 64;          // 16, 32, 64; 0: the device's choice (auto_chunk, kAutoChunk)
  std::optional<double> scale;  // default K^-1/2
  bool output_final_state = false;
  // Packed sequences (fla's cu_seqlens, host offsets 0 = cu[0] < ... < cu[N] = T, B = 1): each
  // runs from its own h0 row to its own ht row, as if alone. Empty: B rows of T tokens.
  std::vector<int64_t> cu_seqlens;
};

struct KdaOutput {
  Tensor o;   // [B, T, HV, V], the inputs' dtype
  Tensor ht;  // [N, HV, K, V] fp32 (fp64 for fp64 inputs); undefined unless asked
};

// q, k, v, g, beta share one dtype (float32, float64 or bfloat16); h0 is in the accumulator
// dtype (fp64 for fp64 inputs, else fp32) or undefined. The autograd node is "kimi_delta_rule".
KdaOutput kimi_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& beta, const KdaOptions& opt = {},
                          const Tensor& h0 = Tensor());

// The kernel problem these tensors describe (validated; errors name the shapes).
kda::Problem kda_problem(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                         const Tensor& beta, const KdaOptions& opt, const Tensor& h0);

}  // namespace gdn::ops
