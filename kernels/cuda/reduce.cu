// CUDA reductions, softmax and cross-entropy (kernels/cuda/reduce.h). Deterministic: every
// reduction is a per-thread loop in index order followed by a fixed shared-memory tree, with a
// launch shape that depends only on the sizes.
//   reduce over [outer, r, inner]: inner >= 32 -> a (32 x 8) block per 32 columns, the 8 rows of
//   threads striding over r; inner < 32 -> one block per output, threads striding over r.
//   max keeps (value, index) pairs; combining two picks the NaN (the first NaN if both are), else
//   the larger value, else the smaller index: exactly the CPU's "first NaN, else first max".
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/kernel_math.h"
#include "kernels/cuda/launch_math.h"
#include "kernels/cuda/reduce.h"

namespace gdn::cuda {

namespace {

constexpr int kColThreadsX = 32, kColThreadsY = 8;

// inner >= 32: threadIdx.x picks the column, threadIdx.y strides over the reduced dim.
template <typename T, bool kMax>
__global__ void reduce_columns_kernel(const T* x, int64_t outer, int64_t r, int64_t inner, T* out,
                                      int64_t* argmax) {
  using A = acc_t<T>;
  __shared__ A sval[kColThreadsY][kColThreadsX];
  __shared__ int64_t sidx[kColThreadsY][kColThreadsX];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t i = int64_t(blockIdx.x) * kColThreadsX + tx;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    A acc = 0;
    MaxArg<A> best{A(0), -1};
    if (i < inner) {
      for (int64_t j = ty; j < r; j += kColThreadsY) {
        const A v = to_acc(x[(o * r + j) * inner + i]);
        if constexpr (kMax)
          best = better(best, MaxArg<A>{v, j});
        else
          acc += v;
      }
    }
    sval[ty][tx] = kMax ? best.v : acc;
    sidx[ty][tx] = best.i;
    __syncthreads();
    if (ty == 0 && i < inner) {
      if constexpr (kMax) {
        for (int y = 1; y < kColThreadsY; ++y)
          best = better(best, MaxArg<A>{sval[y][tx], sidx[y][tx]});
        out[o * inner + i] = from_acc<T>(best.v);
        if (argmax) argmax[o * inner + i] = best.i;
      } else {
        for (int y = 1; y < kColThreadsY; ++y) acc += sval[y][tx];
        out[o * inner + i] = from_acc<T>(acc);
      }
    }
    __syncthreads();
  }
}

// inner < 32: one block per output (o, i), threads stride over the reduced dim.
template <typename T, bool kMax>
__global__ void reduce_rows_kernel(const T* x, int64_t outer, int64_t r, int64_t inner, T* out,
                                   int64_t* argmax) {
  using A = acc_t<T>;
  __shared__ A sval[kMaxBlock];
  __shared__ int64_t sidx[kMaxBlock];
  const unsigned t = threadIdx.x;
  for (int64_t q = blockIdx.x; q < outer * inner; q += gridDim.x) {
    const int64_t o = q / inner, i = q % inner;
    const T* base = x + o * r * inner + i;
    if constexpr (kMax) {
      MaxArg<A> best{A(0), -1};
      for (int64_t j = t; j < r; j += blockDim.x)
        best = better(best, MaxArg<A>{to_acc(base[j * inner]), j});
      sval[t] = best.v;
      sidx[t] = best.i;
      __syncthreads();
      for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
          const MaxArg<A> m =
              better(MaxArg<A>{sval[t], sidx[t]}, MaxArg<A>{sval[t + s], sidx[t + s]});
          sval[t] = m.v;
          sidx[t] = m.i;
        }
        __syncthreads();
      }
      if (t == 0) {
        out[q] = from_acc<T>(sval[0]);
        if (argmax) argmax[q] = sidx[0];
      }
      __syncthreads();
    } else {
      A acc = 0;
      for (int64_t j = t; j < r; j += blockDim.x) acc += to_acc(base[j * inner]);
      acc = block_sum(acc, sval);
      if (t == 0) out[q] = from_acc<T>(acc);
    }
  }
}

template <typename T>
__global__ void max_backward_kernel(const T* dy, const int64_t* argmax, int64_t outer, int64_t r,
                                    int64_t inner, T* dx) {
  const int64_t total = outer * r * inner;
  GDN_GRID_LOOP(e, total) {
    const int64_t o = e / (r * inner), j = (e / inner) % r, i = e % inner;
    const int64_t q = o * inner + i;
    dx[e] = argmax[q] == j ? dy[q] : from_acc<T>(acc_t<T>(0));
  }
}

// Row max and log-sum-exp of one row, by the whole block.
template <typename T>
__device__ void row_max_sum(const T* xr, int64_t d, acc_t<T>* shm, acc_t<T>& m, acc_t<T>& s) {
  using A = acc_t<T>;
  m = -std::numeric_limits<A>::infinity();
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const A v = to_acc(xr[j]);
    if (m < v) m = v;
  }
  m = block_max(m, shm);
  A acc = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) acc += acc_exp(to_acc(xr[j]) - m);
  s = block_sum(acc, shm);
}

template <typename T>
__global__ void softmax_kernel(const T* x, T* y, int64_t n, int64_t d, bool log) {
  using A = acc_t<T>;
  __shared__ A shm[kMaxBlock];
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T* xr = x + row * d;
    T* yr = y + row * d;
    A m, s;
    row_max_sum(xr, d, shm, m, s);
    if (log) {
      const A lse = m + acc_log(s);
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        yr[j] = from_acc<T>(to_acc(xr[j]) - lse);
    } else {
      const A inv = A(1) / s;
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        yr[j] = from_acc<T>(acc_exp(to_acc(xr[j]) - m) * inv);
    }
  }
}

// log: y = x - lse -> dx = dy - softmax * sum(dy);  else dx = y * (dy - sum(dy * y)).
template <typename T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, int64_t n, int64_t d,
                                        bool log) {
  using A = acc_t<T>;
  __shared__ A shm[kMaxBlock];
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T *yr = y + row * d, *gr = dy + row * d;
    T* dr = dx + row * d;
    A acc = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      acc += log ? to_acc(gr[j]) : to_acc(gr[j]) * to_acc(yr[j]);
    const A s = block_sum(acc, shm);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      dr[j] = log ? from_acc<T>(to_acc(gr[j]) - acc_exp(to_acc(yr[j])) * s)
                  : from_acc<T>(to_acc(yr[j]) * (to_acc(gr[j]) - s));
  }
}

// Per row: lse, and the row's loss lse - x[t] (0 for ignored or bad targets).
template <typename T, typename I>
__global__ void cross_entropy_rows_kernel(const T* logits, const I* targets, int64_t n, int64_t v,
                                          int64_t ignore_index, acc_t<T>* lse, acc_t<T>* row_loss) {
  using A = acc_t<T>;
  __shared__ A shm[kMaxBlock];
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T* xr = logits + row * v;
    A m, s;
    row_max_sum(xr, v, shm, m, s);
    if (threadIdx.x == 0) {
      const A l = m + acc_log(s);
      lse[row] = l;
      const int64_t t = int64_t(targets[row]);
      row_loss[row] = (t != ignore_index && t >= 0 && t < v) ? l - to_acc(xr[t]) : A(0);
    }
  }
}

// One block: the mean over non-ignored rows (a fixed order: per-thread strided sums, then a tree),
// the count, and the first bad row.
template <typename T, typename I>
__global__ void cross_entropy_total_kernel(const I* targets, const acc_t<T>* row_loss, int64_t n,
                                           int64_t v, int64_t ignore_index, acc_t<T>* stats,
                                           int64_t* bad_target) {
  using A = acc_t<T>;
  __shared__ A shm[kMaxBlock];
  __shared__ int64_t ishm[kMaxBlock];
  const unsigned tid = threadIdx.x;
  A total = 0;
  int64_t count = 0, bad = std::numeric_limits<int64_t>::max();
  for (int64_t i = tid; i < n; i += blockDim.x) {
    const int64_t t = int64_t(targets[i]);
    if (t == ignore_index) continue;
    if ((t < 0 || t >= v) && i < bad) bad = i;
    total += row_loss[i];
    ++count;
  }
  total = block_sum(total, shm);
  count = block_sum(count, ishm);
  ishm[tid] = bad;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s && ishm[tid + s] < ishm[tid]) ishm[tid] = ishm[tid + s];
    __syncthreads();
  }
  if (tid == 0) {
    stats[0] = count ? total / A(count) : A(0);
    stats[1] = A(count);
    *bad_target = ishm[0] == std::numeric_limits<int64_t>::max() ? -1 : ishm[0];
  }
}

template <typename T, typename I>
__global__ void cross_entropy_backward_kernel(const T* logits, const I* targets,
                                              const acc_t<T>* lse, const acc_t<T>* stats,
                                              const acc_t<T>* dloss, int64_t n, int64_t v,
                                              int64_t ignore_index, T* dlogits) {
  using A = acc_t<T>;
  const A scale = stats[1] > A(0) ? dloss[0] / stats[1] : A(0);
  GDN_GRID_LOOP(e, n * v) {
    const int64_t i = e / v, j = e % v, t = int64_t(targets[i]);
    if (t == ignore_index) {
      dlogits[e] = from_acc<T>(A(0));
      continue;
    }
    const A p = acc_exp(to_acc(logits[e]) - lse[i]);
    dlogits[e] = from_acc<T>(scale * (p - (j == t ? A(1) : A(0))));
  }
}

constexpr int kThreads = 256;

}  // namespace

template <typename T>
void reduce(Reduce op, const T* x, int64_t outer, int64_t r, int64_t inner, T* out, int64_t* argmax,
            void* stream) {
  if (outer * inner == 0) return;
  cudaStream_t s = as_stream(stream);
  const bool max = op == Reduce::max;
  if (inner >= kColThreadsX) {
    const dim3 block(kColThreadsX, kColThreadsY);
    const dim3 grid(unsigned(ceil_div(inner, kColThreadsX)),
                    unsigned(outer < 65535 ? outer : 65535));
    if (max)
      reduce_columns_kernel<T, true><<<grid, block, 0, s>>>(x, outer, r, inner, out, argmax);
    else
      reduce_columns_kernel<T, false><<<grid, block, 0, s>>>(x, outer, r, inner, out, argmax);
  } else {
    const int threads = row_threads(r);
    const unsigned grid = grid_rows(outer * inner);
    if (max)
      reduce_rows_kernel<T, true><<<grid, threads, 0, s>>>(x, outer, r, inner, out, argmax);
    else
      reduce_rows_kernel<T, false><<<grid, threads, 0, s>>>(x, outer, r, inner, out, argmax);
  }
  GDN_KCUDA_LAUNCHED("reduce");
}

template <typename T>
void reduce_max_backward(const T* dy, const int64_t* argmax, int64_t outer, int64_t r,
                         int64_t inner, T* dx, void* stream) {
  const int64_t total = outer * r * inner;
  if (total == 0) return;
  max_backward_kernel<T><<<grid_1d(total, kThreads), kThreads, 0, as_stream(stream)>>>(
      dy, argmax, outer, r, inner, dx);
  GDN_KCUDA_LAUNCHED("max backward");
}

template <typename T>
void softmax_rows(const T* x, T* y, int64_t n, int64_t d, bool log, void* stream) {
  if (n * d == 0) return;
  softmax_kernel<T><<<grid_rows(n), row_threads(d), 0, as_stream(stream)>>>(x, y, n, d, log);
  GDN_KCUDA_LAUNCHED("softmax");
}

template <typename T>
void softmax_rows_backward(const T* y, const T* dy, T* dx, int64_t n, int64_t d, bool log,
                           void* stream) {
  if (n * d == 0) return;
  softmax_backward_kernel<T>
      <<<grid_rows(n), row_threads(d), 0, as_stream(stream)>>>(y, dy, dx, n, d, log);
  GDN_KCUDA_LAUNCHED("softmax backward");
}

template <typename T, typename I>
void cross_entropy_forward(const T* logits, const I* targets, int64_t n, int64_t v,
                           int64_t ignore_index, acc_t<T>* lse, acc_t<T>* row_loss, acc_t<T>* stats,
                           int64_t* bad_target, void* stream) {
  cudaStream_t s = as_stream(stream);
  if (n > 0)
    cross_entropy_rows_kernel<T, I><<<grid_rows(n), row_threads(v), 0, s>>>(
        logits, targets, n, v, ignore_index, lse, row_loss);
  cross_entropy_total_kernel<T, I>
      <<<1, kThreads, 0, s>>>(targets, row_loss, n, v, ignore_index, stats, bad_target);
  GDN_KCUDA_LAUNCHED("cross_entropy");
}

template <typename T, typename I>
void cross_entropy_backward(const T* logits, const I* targets, const acc_t<T>* lse,
                            const acc_t<T>* stats, const acc_t<T>* dloss, int64_t n, int64_t v,
                            int64_t ignore_index, T* dlogits, void* stream) {
  if (n * v == 0) return;
  cross_entropy_backward_kernel<T, I><<<grid_1d(n * v, kThreads), kThreads, 0, as_stream(stream)>>>(
      logits, targets, lse, stats, dloss, n, v, ignore_index, dlogits);
  GDN_KCUDA_LAUNCHED("cross_entropy backward");
}

#define INST_CE(T, I)                                                                              \
  template void cross_entropy_forward<T, I>(const T*, const I*, int64_t, int64_t, int64_t,         \
                                            acc_t<T>*, acc_t<T>*, acc_t<T>*, int64_t*, void*);     \
  template void cross_entropy_backward<T, I>(const T*, const I*, const acc_t<T>*, const acc_t<T>*, \
                                             const acc_t<T>*, int64_t, int64_t, int64_t, T*,       \
                                             void*);
#define INST(T)                                                                                  \
  template void reduce<T>(Reduce, const T*, int64_t, int64_t, int64_t, T*, int64_t*, void*);     \
  template void reduce_max_backward<T>(const T*, const int64_t*, int64_t, int64_t, int64_t, T*,  \
                                       void*);                                                   \
  template void softmax_rows<T>(const T*, T*, int64_t, int64_t, bool, void*);                    \
  template void softmax_rows_backward<T>(const T*, const T*, T*, int64_t, int64_t, bool, void*); \
  INST_CE(T, int32_t) INST_CE(T, int64_t)
INST(float)
INST(double)
INST(bf16)
INST(fp16)

}  // namespace gdn::cuda
