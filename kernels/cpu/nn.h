// CPU kernels of the layer ops: embedding, RMSNorm, L2 norm, causal depthwise conv1d.
// All operate on contiguous row-major data; T is float, double, bf16 or fp16.
#pragma once
#include <cstdint>

#include "kernels/numeric.h"

namespace gdn::cpu {

// out[i, :] = weight[idx[i], :]; indices outside [0, v) set *bad to the first bad position.
template <typename T, typename I>
void embedding_forward(const T* weight, const I* idx, int64_t n, int64_t v, int64_t d, T* out,
                       int64_t* bad);
// dweight = 0; dweight[idx[i], :] += dout[i, :]   (in index order: deterministic)
template <typename T, typename I>
void embedding_backward(const T* dout, const I* idx, int64_t n, int64_t v, int64_t d, T* dweight);

// RMSNorm over rows of [n, d]: rstd_i = 1/sqrt(mean(x_i^2) + eps); y = x * rstd * w (w may be
// null = ones). rstd [n] is saved for backward.
template <typename T>
void rms_norm_forward(const T* x, const T* w, int64_t n, int64_t d, double eps, T* y,
                      acc_t<T>* rstd);
// dx = rstd * (dy w - x rstd^2 mean(dy w x));  dw = sum_i dy x rstd  (dw may be null).
// dx_add (may be null) is added to dx after dx is rounded to T: a residual's own gradient, as an
// unfused add's accumulation would add it (add_rms_norm).
template <typename T>
void rms_norm_backward(const T* x, const T* w, const acc_t<T>* rstd, const T* dy, int64_t n,
                       int64_t d, T* dx, T* dw, const T* dx_add = nullptr);

// L2 norm over rows: y = x * rn, rn = 1/sqrt(sum x^2 + eps); rn [n] saved.
template <typename T>
void l2_norm_forward(const T* x, int64_t n, int64_t d, double eps, T* y, acc_t<T>* rn);
// dx = rn * (dy - y * sum(dy y))
template <typename T>
void l2_norm_backward(const T* y, const acc_t<T>* rn, const T* dy, int64_t n, int64_t d, T* dx);

// Causal depthwise conv1d: x, y [b, t, c], w [c, k]: y[b,s,c] = sum_j w[c,j] x[b, s-k+1+j, c].
// Packed sequences: seq_start [t] (null: none) holds the first position of the sequence each
// position belongs to, and a tap reads x[src] only when src >= seq_start[s], so the conv restarts
// at every boundary (each sequence sees zeros before its start, as if alone).
template <typename T>
void causal_conv1d_forward(const T* x, const T* w, int64_t b, int64_t t, int64_t c, int64_t k, T* y,
                           const int64_t* seq_start = nullptr);
// dx[b,s,c] = sum_j w[c,j] dy[b, s+k-1-j, c];  dw[c,j] = sum_{b,s} dy[b,s,c] x[b, s-k+1+j, c]
// (with seq_start: only the taps the forward read).
template <typename T>
void causal_conv1d_backward(const T* x, const T* w, const T* dy, int64_t b, int64_t t, int64_t c,
                            int64_t k, T* dx, T* dw, const int64_t* seq_start = nullptr);

}  // namespace gdn::cpu
