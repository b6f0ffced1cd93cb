// CUDA reductions and row-wise kernels: the contracts of kernels/cpu/reduce.h on device
// pointers, with a stream (cudaStream_t as void*). Every sum runs in a fixed order that depends
// only on the sizes (no atomics), so results are bitwise reproducible; they accumulate in
// acc_t<T> (fp32, fp64 for double).
#pragma once
#include <cstdint>

#include "kernels/cpu/reduce.h"  // cpu::Reduce
#include "kernels/numeric.h"

namespace gdn::cuda {

using cpu::Reduce;

// out[o, i] = reduce_j x[o, j, i]; for max also the first arg-max index (argmax may be null). A
// NaN wins the max (the first one), as on the CPU.
template <typename T>
void reduce(Reduce op, const T* x, int64_t outer, int64_t r, int64_t inner, T* out, int64_t* argmax,
            void* stream);

// dx = 0 except dx[o, argmax[o, i], i] = dy[o, i].
template <typename T>
void reduce_max_backward(const T* dy, const int64_t* argmax, int64_t outer, int64_t r,
                         int64_t inner, T* dx, void* stream);

// Row softmax (or log-softmax) over the last dim of [n, d], and the backward from y.
template <typename T>
void softmax_rows(const T* x, T* y, int64_t n, int64_t d, bool log, void* stream);
template <typename T>
void softmax_rows_backward(const T* y, const T* dy, T* dx, int64_t n, int64_t d, bool log,
                           void* stream);

// Cross-entropy, mean over rows whose target != ignore_index (cpu::cross_entropy_forward).
// row_loss [n] is scratch; stats = {loss, count} and bad_target [1] are device memory: bad_target
// gets the first row whose target is outside [0, v) and not ignored, or -1. I is int32_t/int64_t.
template <typename T, typename I>
void cross_entropy_forward(const T* logits, const I* targets, int64_t n, int64_t v,
                           int64_t ignore_index, acc_t<T>* lse, acc_t<T>* row_loss, acc_t<T>* stats,
                           int64_t* bad_target, void* stream);
// dlogits[i, j] = dloss / count * (softmax_ij - [j == t_i]) (0 for ignored rows); stats and dloss
// [1] are device memory.
template <typename T, typename I>
void cross_entropy_backward(const T* logits, const I* targets, const acc_t<T>* lse,
                            const acc_t<T>* stats, const acc_t<T>* dloss, int64_t n, int64_t v,
                            int64_t ignore_index, T* dlogits, void* stream);

}  // namespace gdn::cuda
