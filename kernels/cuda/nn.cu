// CUDA layer-op kernels (kernels/cuda/nn.h). Row ops (RMSNorm, L2 norm) run one block per row
// with a fixed-tree block sum. Column sums over all rows (RMSNorm dw, conv dw) run in two passes:
// pass 1 gives each (part of the rows, column) a partial in a fixed order, pass 2 adds the parts
// in order; the split depends only on the sizes. The embedding backward gives each block a tile
// of vocabulary rows; it scans all tokens in order and each thread adds its columns, so every
// dweight element is summed in token order, as on the CPU. No atomics anywhere.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/nn.h"

namespace gdn::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kTokenTile = 1024;  // token indices staged in shared memory per step

template <typename I>
__global__ void first_bad_index_kernel(const I* idx, int64_t n, int64_t v, int64_t* bad) {
  __shared__ int64_t shm[kThreads];
  int64_t first = std::numeric_limits<int64_t>::max();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t r = int64_t(idx[i]);
    if ((r < 0 || r >= v) && i < first) first = i;
  }
  shm[threadIdx.x] = first;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s && shm[threadIdx.x + s] < shm[threadIdx.x])
      shm[threadIdx.x] = shm[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *bad = shm[0] == std::numeric_limits<int64_t>::max() ? -1 : shm[0];
}

template <typename T, typename I>
__global__ void embedding_gather_kernel(const T* weight, const I* idx, int64_t n, int64_t v,
                                        int64_t d, T* out) {
  GDN_GRID_LOOP(e, n * d) {
    const int64_t r = int64_t(idx[e / d]);
    out[e] = (r >= 0 && r < v) ? weight[r * d + e % d] : from_acc<T>(acc_t<T>(0));
  }
}

// Block: vocabulary rows [r0, r1) x all columns; thread owns columns tid, tid + blockDim, ...
template <typename T, typename I>
__global__ void embedding_backward_kernel(const T* dout, const I* idx, int64_t n, int64_t v,
                                          int64_t d, int64_t rows_per_block, T* dweight) {
  __shared__ int64_t tok[kTokenTile];
  const int64_t r0 = int64_t(blockIdx.x) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < v ? r0 + rows_per_block : v;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      dweight[r * d + j] = from_acc<T>(acc_t<T>(0));
  for (int64_t base = 0; base < n; base += kTokenTile) {
    const int64_t count = n - base < kTokenTile ? n - base : kTokenTile;
    __syncthreads();  // the previous tile is no longer read
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) tok[k] = int64_t(idx[base + k]);
    __syncthreads();
    for (int64_t k = 0; k < count; ++k) {
      const int64_t r = tok[k];
      if (r < r0 || r >= r1) continue;
      const T* src = dout + (base + k) * d;
      T* dst = dweight + r * d;
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        dst[j] = from_acc<T>(to_acc(dst[j]) + to_acc(src[j]));
    }
  }
}

// sum_j x_j^2 of one row by the whole block (block_sum); every thread gets it.
template <typename T>
__device__ acc_t<T> block_sum_squares(const T* x, int64_t d, acc_t<T>* shm) {
  acc_t<T> ss = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) ss += to_acc(x[j]) * to_acc(x[j]);
  return block_sum(ss, shm);
}

template <typename T>
__global__ void rms_norm_forward_kernel(const T* x, const T* w, int64_t n, int64_t d, double eps,
                                        T* y, acc_t<T>* rstd) {
  using A = acc_t<T>;
  __shared__ A shm[kMaxBlock];
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T* xr = x + row * d;
    const A r = acc_rsqrt(block_sum_squares(xr, d, shm) / A(d) + A(eps));
    if (threadIdx.x == 0) rstd[row] = r;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      y[row * d + j] = from_acc<T>(to_acc(xr[j]) * r * (w ? to_acc(w[j]) : A(1)));
  }
}

template <typename T>
__global__ void rms_norm_backward_dx_kernel(const T* x, const T* w, const acc_t<T>* rstd,
                                            const T* dy, int64_t n, int64_t d, T* dx) {
  using A = acc_t<T>;
  __shared__ A shm[kMaxBlock];
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T *xr = x + row * d, *gr = dy + row * d;
    const A r = rstd[row];
    A dot = 0;  // sum_j dy_j w_j x_j
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      dot += to_acc(gr[j]) * (w ? to_acc(w[j]) : A(1)) * to_acc(xr[j]);
    dot = block_sum(dot, shm);
    const A c = dot * r * r / A(d);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      dx[row * d + j] =
          from_acc<T>(r * (to_acc(gr[j]) * (w ? to_acc(w[j]) : A(1)) - to_acc(xr[j]) * c));
  }
}

template <typename T>
__global__ void l2_norm_forward_kernel(const T* x, int64_t n, int64_t d, double eps, T* y,
                                       acc_t<T>* rn) {
  using A = acc_t<T>;
  __shared__ A shm[kMaxBlock];
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T* xr = x + row * d;
    const A r = acc_rsqrt(block_sum_squares(xr, d, shm) + A(eps));
    if (threadIdx.x == 0) rn[row] = r;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      y[row * d + j] = from_acc<T>(to_acc(xr[j]) * r);
  }
}

template <typename T>
__global__ void l2_norm_backward_kernel(const T* y, const acc_t<T>* rn, const T* dy, int64_t n,
                                        int64_t d, T* dx) {
  using A = acc_t<T>;
  __shared__ A shm[kMaxBlock];
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T *yr = y + row * d, *gr = dy + row * d;
    A dot = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dot += to_acc(gr[j]) * to_acc(yr[j]);
    dot = block_sum(dot, shm);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      dx[row * d + j] = from_acc<T>(rn[row] * (to_acc(gr[j]) - to_acc(yr[j]) * dot));
  }
}

// The terms summed over rows for the parameter gradients.
template <typename T>
struct RmsDwTerm {  // dw[j] = sum_i dy_ij x_ij rstd_i
  const T *x, *dy;
  const acc_t<T>* rstd;
  int64_t d;
  __device__ acc_t<T> operator()(int64_t row, int64_t col) const {
    return to_acc(dy[row * d + col]) * to_acc(x[row * d + col]) * rstd[row];
  }
};
template <typename T>
struct ConvDwTerm {  // dw[ch, j] = sum_{b,s} dy[b,s,ch] x[b, s-k+1+j, ch]  (row = b * t + s)
  const T *x, *dy;
  int64_t t, c, k;
  const int64_t* seq_start;  // null: one sequence per row; else only taps inside the sequence
  __device__ acc_t<T> operator()(int64_t row, int64_t col) const {
    const int64_t ch = col / k, j = col % k, s = row % t;
    if (s - k + 1 + j < (seq_start ? seq_start[s] : 0)) return acc_t<T>(0);
    return to_acc(dy[row * c + ch]) * to_acc(x[(row - k + 1 + j) * c + ch]);
  }
};

constexpr int kPartX = 32, kPartY = 8;

// Pass 1: partial[p, col] = sum over the rows of part p (threadIdx.y strides them, then the 8
// partial sums are added in y order).
template <typename A, typename Term>
__global__ void column_partials_kernel(Term term, int64_t n, int64_t cols, int64_t rows_per_part,
                                       A* partial) {
  __shared__ A shm[kPartY][kPartX];
  const int64_t col = int64_t(blockIdx.x) * kPartX + threadIdx.x, p = blockIdx.y;
  const int64_t r0 = p * rows_per_part, r1 = r0 + rows_per_part < n ? r0 + rows_per_part : n;
  A acc = 0;
  if (col < cols)
    for (int64_t row = r0 + threadIdx.y; row < r1; row += kPartY) acc += term(row, col);
  shm[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int y = 1; y < kPartY; ++y) acc += shm[y][threadIdx.x];
    partial[p * cols + col] = acc;
  }
}

// Pass 2: out[col] = sum_p partial[p, col], p in order.
template <typename T>
__global__ void column_total_kernel(const acc_t<T>* partial, int64_t parts, int64_t cols, T* out) {
  GDN_GRID_LOOP(col, cols) {
    acc_t<T> acc = 0;
    for (int64_t p = 0; p < parts; ++p) acc += partial[p * cols + col];
    out[col] = from_acc<T>(acc);
  }
}

template <typename T, typename Term>
void column_sums(Term term, int64_t n, int64_t cols, T* out, acc_t<T>* workspace, cudaStream_t s) {
  if (cols == 0) return;
  const RowSplit split = split_rows(n);
  if (split.parts > 0) {
    const dim3 grid(unsigned(ceil_div(cols, kPartX)), unsigned(split.parts));
    column_partials_kernel<acc_t<T>, Term>
        <<<grid, dim3(kPartX, kPartY), 0, s>>>(term, n, cols, split.rows_per_part, workspace);
  }
  column_total_kernel<T>
      <<<grid_1d(cols, kThreads), kThreads, 0, s>>>(workspace, split.parts, cols, out);
}

// out[b, s, ch] = sum_j w[ch, j] in[b, s + dir (j - k + 1), ch] over the taps j whose step lies in
// [0, t): dir = 1 is the causal conv, y from x; dir = -1 its dx from dy (the taps in reverse).
// seq_start (null: none) keeps every tap inside one packed sequence: the forward reads src >=
// seq_start[s], so the backward's output s takes dy[dst] only where seq_start[dst] <= s.
template <typename T>
__global__ void conv_taps_kernel(const T* w, const T* in, int64_t b, int64_t t, int64_t c,
                                 int64_t k, int64_t dir, const int64_t* seq_start, T* out) {
  using A = acc_t<T>;
  GDN_GRID_LOOP(e, b * t * c) {
    const int64_t ch = e % c, s = (e / c) % t, row = e / c;
    A acc = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t shift = dir * (j - k + 1), src = s + shift;
      if (src < 0 || src >= t) continue;
      if (seq_start && (dir > 0 ? src < seq_start[s] : seq_start[src] > s)) continue;
      acc += to_acc(w[ch * k + j]) * to_acc(in[(row + shift) * c + ch]);
    }
    out[e] = from_acc<T>(acc);
  }
}

}  // namespace

template <typename T, typename I>
void embedding_forward(const T* weight, const I* idx, int64_t n, int64_t v, int64_t d, T* out,
                       int64_t* bad, void* stream) {
  cudaStream_t s = as_stream(stream);
  first_bad_index_kernel<I><<<1, kThreads, 0, s>>>(idx, n, v, bad);
  if (n * d > 0)
    embedding_gather_kernel<T, I>
        <<<grid_1d(n * d, kThreads), kThreads, 0, s>>>(weight, idx, n, v, d, out);
  GDN_KCUDA_LAUNCHED("embedding");
}

template <typename T, typename I>
void embedding_backward(const T* dout, const I* idx, int64_t n, int64_t v, int64_t d, T* dweight,
                        void* stream) {
  if (v * d == 0) return;
  const int64_t rows = embedding_rows_per_block(v);
  embedding_backward_kernel<T, I><<<unsigned(ceil_div(v, rows)), kThreads, 0, as_stream(stream)>>>(
      dout, idx, n, v, d, rows, dweight);
  GDN_KCUDA_LAUNCHED("embedding backward");
}

template <typename T>
void rms_norm_forward(const T* x, const T* w, int64_t n, int64_t d, double eps, T* y,
                      acc_t<T>* rstd, void* stream) {
  if (n == 0) return;
  rms_norm_forward_kernel<T>
      <<<grid_rows(n), row_threads(d), 0, as_stream(stream)>>>(x, w, n, d, eps, y, rstd);
  GDN_KCUDA_LAUNCHED("rms_norm");
}

template <typename T>
void rms_norm_backward(const T* x, const T* w, const acc_t<T>* rstd, const T* dy, int64_t n,
                       int64_t d, T* dx, T* dw, acc_t<T>* workspace, void* stream) {
  cudaStream_t s = as_stream(stream);
  if (n > 0)
    rms_norm_backward_dx_kernel<T>
        <<<grid_rows(n), row_threads(d), 0, s>>>(x, w, rstd, dy, n, d, dx);
  if (dw) column_sums<T>(RmsDwTerm<T>{x, dy, rstd, d}, n, d, dw, workspace, s);
  GDN_KCUDA_LAUNCHED("rms_norm backward");
}

template <typename T>
void l2_norm_forward(const T* x, int64_t n, int64_t d, double eps, T* y, acc_t<T>* rn,
                     void* stream) {
  if (n == 0) return;
  l2_norm_forward_kernel<T>
      <<<grid_rows(n), row_threads(d), 0, as_stream(stream)>>>(x, n, d, eps, y, rn);
  GDN_KCUDA_LAUNCHED("l2_norm");
}

template <typename T>
void l2_norm_backward(const T* y, const acc_t<T>* rn, const T* dy, int64_t n, int64_t d, T* dx,
                      void* stream) {
  if (n == 0) return;
  l2_norm_backward_kernel<T>
      <<<grid_rows(n), row_threads(d), 0, as_stream(stream)>>>(y, rn, dy, n, d, dx);
  GDN_KCUDA_LAUNCHED("l2_norm backward");
}

template <typename T>
void causal_conv1d_forward(const T* x, const T* w, int64_t b, int64_t t, int64_t c, int64_t k, T* y,
                           void* stream, const int64_t* seq_start) {
  if (b * t * c == 0) return;
  conv_taps_kernel<T><<<grid_1d(b * t * c, kThreads), kThreads, 0, as_stream(stream)>>>(
      w, x, b, t, c, k, 1, seq_start, y);
  GDN_KCUDA_LAUNCHED("causal_conv1d");
}

template <typename T>
void causal_conv1d_backward(const T* x, const T* w, const T* dy, int64_t b, int64_t t, int64_t c,
                            int64_t k, T* dx, T* dw, acc_t<T>* workspace, void* stream,
                            const int64_t* seq_start) {
  cudaStream_t s = as_stream(stream);
  if (dx && b * t * c > 0)
    conv_taps_kernel<T>
        <<<grid_1d(b * t * c, kThreads), kThreads, 0, s>>>(w, dy, b, t, c, k, -1, seq_start, dx);
  if (dw) column_sums<T>(ConvDwTerm<T>{x, dy, t, c, k, seq_start}, b * t, c * k, dw, workspace, s);
  GDN_KCUDA_LAUNCHED("causal_conv1d backward");
}

#define INST_EMB(T, I)                                                                     \
  template void embedding_forward<T, I>(const T*, const I*, int64_t, int64_t, int64_t, T*, \
                                        int64_t*, void*);                                  \
  template void embedding_backward<T, I>(const T*, const I*, int64_t, int64_t, int64_t, T*, void*);
#define INST(T)                                                                                    \
  INST_EMB(T, int32_t)                                                                             \
  INST_EMB(T, int64_t)                                                                             \
  template void rms_norm_forward<T>(const T*, const T*, int64_t, int64_t, double, T*, acc_t<T>*,   \
                                    void*);                                                        \
  template void rms_norm_backward<T>(const T*, const T*, const acc_t<T>*, const T*, int64_t,       \
                                     int64_t, T*, T*, acc_t<T>*, void*);                           \
  template void l2_norm_forward<T>(const T*, int64_t, int64_t, double, T*, acc_t<T>*, void*);      \
  template void l2_norm_backward<T>(const T*, const acc_t<T>*, const T*, int64_t, int64_t, T*,     \
                                    void*);                                                        \
  template void causal_conv1d_forward<T>(const T*, const T*, int64_t, int64_t, int64_t, int64_t,   \
                                         T*, void*, const int64_t*);                               \
  template void causal_conv1d_backward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, \
                                          int64_t, T*, T*, acc_t<T>*, void*, const int64_t*);
INST(float)
INST(double)
INST(bf16)
INST(fp16)

}  // namespace gdn::cuda
