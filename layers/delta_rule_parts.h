// Pieces the delta-rule mixers share (Gated DeltaNet, Kimi Delta Attention): fla's
// initialisation of A_log and dt_bias, and a short conv that carries its last inputs from one
// generation call to the next.
#pragma once
#include "layers/module.h"
#include "layers/short_conv.h"
#include "layers/token_mixer.h"

namespace gdn::nn {

// A_log = log(A), A ~ U(low, high) (Gated DeltaNet: U(0, 16); KDA: U(1, 16)), n elements.
Tensor init_a_log(int64_t n, double low, double high, const InitContext& ctx);
// dt_bias = softplus^-1(dt) = dt + log(-expm1(-dt)), dt log-uniform in [1e-3, 0.1] clamped at
// 1e-4, n elements.
Tensor init_dt_bias(int64_t n, const InitContext& ctx);

// conv(x) for x [B, T, C]; with a tail (the previous W - 1 inputs, zeros at first) the conv runs
// over [tail ; x] and the tail becomes the last W - 1 inputs.
Tensor conv_with_tail(const ShortConv& conv, const Tensor& x, const CuSeqlens& cu, Tensor* tail);

}  // namespace gdn::nn
