// The gated delta rule as a differentiable op (a custom autograd Function over the kernels of
// kernels/gated_delta_rule.h). Layout is fla's: q, k [B, T, H, K], v [B, T, HV, V],
// g, beta [B, T, HV], h0 [N, HV, K, V]; returns o [B, T, HV, V] and, when asked, ht [N, HV, K, V].
// N = B, or with cu_seqlens (B = 1) the number of packed sequences.
#pragma once
#include <optional>
#include <vector>

#include "kernels/gdr_registry.h"
#include "src/core/tensor.h"

namespace gdn::ops {

struct GdrOptions {
  gdr::Impl impl = gdr::Impl::chunked;
  int chunk_size = 64;  // 16, 32, 64; 0: the device's choice (auto_chunk, kAutoChunk)
  gdr::Residual residual = gdr::Residual::minimal;
  std::optional<double> scale;  // default K^-1/2
  bool output_final_state = false;
  // Packed sequences (fla's cu_seqlens, host offsets 0 = cu[0] < ... < cu[N] = T, B = 1): each
  // runs from its own h0 row to its own ht row, as if alone. Empty: B rows of T tokens.
  std::vector<int64_t> cu_seqlens;
  // CUDA fused kernels: their V tile and chunk (0: the plan's choice; model.fused_vt, fused_sub).
  int64_t fused_vt = 0, fused_sub = 0;

  // The implementation and residual policy of a registry entry (kernels/gdr_registry.h).
  GdrOptions& use(const gdr::Implementation& entry) {
    impl = entry.impl;
    residual = entry.residual;
    return *this;
  }
};

struct GdrOutput {
  Tensor o;
  Tensor ht;  // [N, HV, K, V] in fp32 (fp64 for fp64 inputs); undefined unless asked
};

// beta is ignored (may be undefined) for impl = ssd. h0 may be undefined.
GdrOutput gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                           const Tensor& beta, const GdrOptions& opt = {},
                           const Tensor& h0 = Tensor());

// The kernel problem these tensors describe (validated; errors name the shapes).
gdr::Problem gdr_problem(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                         const Tensor& beta, const GdrOptions& opt, const Tensor& h0);

}  // namespace gdn::ops
