// CUDA kernels of the layer ops: the contracts of kernels/cpu/nn.h on device pointers, with a
// stream. Deterministic: no atomics; parameter gradients (RMSNorm dw, conv dw) are column sums in
// two passes over a fixed split of the rows (launch_math.h: split_rows), and the embedding
// gradient is summed per vocabulary row in token order. T is float, double, bf16 or fp16.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch_math.h"
#include "kernels/numeric.h"

namespace gdn::cuda {

// out[i, :] = weight[idx[i], :]; rows with an index outside [0, v) are written as zeros and
// *bad (device, [1]) gets the first such position, or -1. I is int32_t or int64_t.
template <typename T, typename I>
void embedding_forward(const T* weight, const I* idx, int64_t n, int64_t v, int64_t d, T* out,
                       int64_t* bad, void* stream);
// dweight = 0; dweight[idx[i], :] += dout[i, :] in token order (the CPU's order and rounding:
// bitwise equal to kernels/cpu). Indices must be valid (the forward checked them).
template <typename T, typename I>
void embedding_backward(const T* dout, const I* idx, int64_t n, int64_t v, int64_t d, T* dweight,
                        void* stream);

// RMSNorm over rows of [n, d] (cpu::rms_norm_forward); w may be null (ones).
template <typename T>
void rms_norm_forward(const T* x, const T* w, int64_t n, int64_t d, double eps, T* y,
                      acc_t<T>* rstd, void* stream);
// Acc elements of scratch rms_norm_backward needs for dw (0 when dw is not wanted is fine too).
inline int64_t rms_norm_backward_workspace(int64_t n, int64_t d) {
  return split_rows(n).parts * d;
}
// dx = rstd (dy w - x rstd^2 mean(dy w x));  dw = sum_i dy x rstd (dw may be null).
template <typename T>
void rms_norm_backward(const T* x, const T* w, const acc_t<T>* rstd, const T* dy, int64_t n,
                       int64_t d, T* dx, T* dw, acc_t<T>* workspace, void* stream);

// L2 norm over rows: y = x rn, rn = 1 / sqrt(sum x^2 + eps);  dx = rn (dy - y sum(dy y)).
template <typename T>
void l2_norm_forward(const T* x, int64_t n, int64_t d, double eps, T* y, acc_t<T>* rn,
                     void* stream);
template <typename T>
void l2_norm_backward(const T* y, const acc_t<T>* rn, const T* dy, int64_t n, int64_t d, T* dx,
                      void* stream);

// Causal depthwise conv1d, x, y [b, t, c], w [c, k] (cpu::causal_conv1d_forward); seq_start
// (device, [t]; null: none) restarts it at packed-sequence boundaries as on the CPU.
template <typename T>
void causal_conv1d_forward(const T* x, const T* w, int64_t b, int64_t t, int64_t c, int64_t k, T* y,
                           void* stream, const int64_t* seq_start = nullptr);
inline int64_t causal_conv1d_backward_workspace(int64_t b, int64_t t, int64_t c, int64_t k) {
  return split_rows(b * t).parts * c * k;
}
// dx (may be null), dw (may be null; needs the workspace above).
template <typename T>
void causal_conv1d_backward(const T* x, const T* w, const T* dy, int64_t b, int64_t t, int64_t c,
                            int64_t k, T* dx, T* dw, acc_t<T>* workspace, void* stream,
                            const int64_t* seq_start = nullptr);

}  // namespace gdn::cuda
