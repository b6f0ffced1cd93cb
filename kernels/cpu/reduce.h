// CPU reductions and row-wise kernels on contiguous data viewed as [outer, r, inner] or [N, D].
#pragma once
#include <cstdint>

#include "kernels/numeric.h"

namespace gdn::cpu {

enum class Reduce : uint8_t { sum, max };

// out[o, i] = reduce_j x[o, j, i]; for max also the first arg-max index (may be null).
template <typename T>
void reduce(Reduce op, const T* x, int64_t outer, int64_t r, int64_t inner, T* out,
            int64_t* argmax);

// max backward: dx = 0 except dx[o, argmax[o,i], i] = dy[o, i].
template <typename T>
void reduce_max_backward(const T* dy, const int64_t* argmax, int64_t outer, int64_t r,
                         int64_t inner, T* dx);

// Row softmax (or log-softmax) over the last dim of [N, D], and the backward from y.
template <typename T>
void softmax_rows(const T* x, T* y, int64_t n, int64_t d, bool log);
template <typename T>
void softmax_rows_backward(const T* y, const T* dy, T* dx, int64_t n, int64_t d, bool log);

// Cross-entropy, mean over rows whose target != ignore_index:
//   loss = sum_i (lse_i - x[i, t_i]) / count.   stats = {loss, count}; lse [n] saved.
// I is int32_t or int64_t. Targets outside [0, v) (and not ignored) set bad_target to the row.
template <typename T, typename I>
void cross_entropy_forward(const T* logits, const I* targets, int64_t n, int64_t v,
                           int64_t ignore_index, acc_t<T>* lse, acc_t<T>* stats,
                           int64_t* bad_target);
//   dlogits[i, j] = dloss / count * (softmax_ij - [j == t_i])  (0 for ignored rows)
template <typename T, typename I>
void cross_entropy_backward(const T* logits, const I* targets, const acc_t<T>* lse,
                            const acc_t<T>* stats, const acc_t<T>* dloss, int64_t n, int64_t v,
                            int64_t ignore_index, T* dlogits);

}  // namespace gdn::cpu
