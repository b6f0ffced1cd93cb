// ShortConv: fla's ShortConvolution, a causal depthwise conv1d then SiLU, weight [C, 1, W]
// initialised N(0, initializer_range).
#pragma once
#include <vector>

#include "layers/module.h"

namespace gdn::nn {

class ShortConv : public Module {
 public:
  // `impl`: the CUDA path of the conv (model.conv1d_impl).
  ShortConv(int64_t channels, int64_t width, const InitContext& ctx,
            cuda::Conv1dImpl impl = cuda::kConv1dDefault);
  // x [B, T, C]; with cu_seqlens (packed sequences, B = 1) the conv restarts at each boundary.
  Tensor forward(const Tensor& x, const std::vector<int64_t>& cu_seqlens = {}) const;
  // forward, then each head of head_dim channels scaled to unit L2 norm (a delta-rule layer's q
  // and k), in one op.
  Tensor forward_l2norm(const Tensor& x, int64_t head_dim, double eps,
                        const std::vector<int64_t>& cu_seqlens = {}) const;
  Tensor weight;
  cuda::Conv1dImpl impl;
};

}  // namespace gdn::nn
