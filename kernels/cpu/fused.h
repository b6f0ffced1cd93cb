// CPU kernels of the fused layer ops: each replaces a chain of element-wise passes (conv then
// SiLU, SiLU then mul, RMSNorm then a gate, add then RMSNorm) with one pass over memory.
// All operate on contiguous row-major data; T is float, double, bf16 or fp16 (math in acc_t<T>).
#pragma once
#include <cstdint>

#include "kernels/numeric.h"

namespace gdn::cpu {

// SwiGLU: y = silu(g) u.
template <typename T>
void swiglu_forward(const T* g, const T* u, int64_t n, T* y);
// dg = dy u s (1 + g (1 - s)), du = dy g s  (s = sigmoid(g)); one pass.
template <typename T>
void swiglu_backward(const T* g, const T* u, const T* dy, int64_t n, T* dg, T* du);

// Gated RMSNorm over rows of [n, d]: y = x rstd w act(z), act = sigmoid or silu (w may be null
// = ones); rstd [n] saved as in rms_norm_forward.
template <typename T>
void gated_rms_norm_forward(const T* x, const T* w, const T* z, int64_t n, int64_t d, double eps,
                            bool sigmoid_gate, T* y, acc_t<T>* rstd);
// With dn = dy act(z) (the gradient of the normed x): dx = rstd (dn w - x rstd^2 mean(dn w x)),
// dz = dy x rstd w act'(z), dw = sum_i dn x rstd (dw may be null).
template <typename T>
void gated_rms_norm_backward(const T* x, const T* w, const T* z, const acc_t<T>* rstd, const T* dy,
                             int64_t n, int64_t d, bool sigmoid_gate, T* dx, T* dz, T* dw);

// Residual add + RMSNorm: h = x + r, y = h rstd w (w may be null); h, y [n, d], rstd [n] saved.
template <typename T>
void add_rms_norm_forward(const T* x, const T* r, const T* w, int64_t n, int64_t d, double eps,
                          T* h, T* y, acc_t<T>* rstd);
// dh = rstd (dy w - h rstd^2 mean(dy w h)) + dh_out  (dh_out: the gradient reaching h directly,
// may be null); dx = dr = dh; dw = sum_i dy h rstd (may be null).
template <typename T>
void add_rms_norm_backward(const T* h, const T* w, const acc_t<T>* rstd, const T* dy,
                           const T* dh_out, int64_t n, int64_t d, T* dh, T* dw);

// Causal depthwise conv1d + SiLU: y = silu(conv(x, w)) with the conv of causal_conv1d_forward
// (kernels/cpu/nn.h, same seq_start contract); the pre-activation is not stored. With norm_dim
// d > 0 (dividing c) each group of d channels of y is then scaled to unit L2 norm, as l2_norm
// does: y / sqrt(sum y^2 + eps) (the q and k of a delta-rule layer, one head a group).
template <typename T>
void causal_conv1d_silu_forward(const T* x, const T* w, int64_t b, int64_t t, int64_t c, int64_t k,
                                T* y, const int64_t* seq_start = nullptr, int64_t norm_dim = 0,
                                double eps = 0);
// Its backward, the conv recomputed: with dp the gradient at the conv's output (through the norm
// and silu'), dx and dw of the conv from dp (kernels/cpu/conv_rows.h, in one tiled pass; either
// may be null).
template <typename T>
void causal_conv1d_silu_backward(const T* x, const T* w, const T* dy, int64_t b, int64_t t,
                                 int64_t c, int64_t k, T* dx, T* dw,
                                 const int64_t* seq_start = nullptr, int64_t norm_dim = 0,
                                 double eps = 0);

}  // namespace gdn::cpu
