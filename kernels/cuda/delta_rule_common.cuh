// Device helpers every delta-rule family's CUDA kernels share (the gated delta rule's
// kernels/cuda/gdr_*.cu through gdr_common.cuh, Kimi Delta Attention's kernels/cuda/kda_*.cu
// through kda_common.cuh): a block-wide row-major GEMM for small products, a warp's dot product,
// and the recurrent forward's state column, which one warp keeps in registers.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_util.cuh"
#include "kernels/numeric.h"

namespace gdn::delta_rule::cuda_detail {

// C[M, N] = alpha op(A) op(B) + beta C, row-major, by the whole block: each thread owns outputs
// tid, tid + blockDim, ... and sums its dot product in index order (deterministic). C must not
// alias A or B; C is not read when beta == 0. Ends with __syncthreads(). I, the index type, is
// the callers' (int in gdr_ssd.cu, int64_t in kda_chunked.cu).
template <typename A, typename I>
__device__ void block_gemm(bool ta, bool tb, I M, I N, I K, A alpha, const A* a, I lda, const A* b,
                           I ldb, A beta, A* c, I ldc) {
  for (I idx = threadIdx.x; idx < M * N; idx += blockDim.x) {
    const I i = idx / N, j = idx % N;
    A acc = 0;
    for (I l = 0; l < K; ++l)
      acc += (ta ? a[l * lda + i] : a[i * lda + l]) * (tb ? b[j * ldb + l] : b[l * ldb + j]);
    c[i * ldc + j] = beta == A(0) ? alpha * acc : alpha * acc + beta * c[i * ldc + j];
  }
  __syncthreads();
}

// Sum over j < V of x[j] y[j] by one warp (lanes stride j, then a butterfly).
template <typename A>
__device__ __forceinline__ A warp_dot(const A* x, const A* y, int64_t V, int lane) {
  A acc = 0;
  for (int64_t j = lane; j < V; j += 32) acc += x[j] * y[j];
  return ::gdn::cuda::warp_sum(acc);
}

// Column j of a K x V state held by one warp in registers: lane l holds rows l, l + 32, ...,
// kRows of them (K <= 32 kRows).

// The recurrent forward's grid: block (s, y) runs kWarps columns of value slice s, warp w of
// it column j = y kWarps + w; lane is the thread's lane in its warp.
struct WarpColumn {
  int lane;
  int64_t s, j;
};
template <int kWarps>
__device__ __forceinline__ WarpColumn warp_column() {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  return WarpColumn{lane, int64_t(blockIdx.x), int64_t(blockIdx.y) * kWarps + warp};
}

// S[i] = src[base + a V + j] for the rows a = lane + 32 i < K; 0 beyond K, and everywhere
// without src.
template <int kRows, typename A>
__device__ __forceinline__ void load_state_column(A (&S)[kRows], const A* src, int64_t base,
                                                  int64_t j, int64_t K, int64_t V, int lane) {
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int64_t a = lane + 32 * i;
    S[i] = (a < K && src) ? src[base + a * V + j] : A(0);
  }
}

// dst[a V + j] = S[i] for the rows a = lane + 32 i < K.
template <int kRows, typename A>
__device__ __forceinline__ void store_state_column(const A (&S)[kRows], A* dst, int64_t j,
                                                   int64_t K, int64_t V, int lane) {
#pragma unroll
  for (int i = 0; i < kRows; ++i)
    if (lane + 32 * i < K) dst[(lane + 32 * i) * V + j] = S[i];
}

// The end of a step on the column: S[:, j] += k u (kr: the lane's rows of k), then returns
// S[:, j] . (scale q) (q: the token's row, read at the rows < K), summed over the warp.
template <int kRows, typename T, typename A>
__device__ __forceinline__ A update_state_column(A (&S)[kRows], const A (&kr)[kRows], A u,
                                                 const T* q, A scale, int64_t K, int lane) {
  A out = 0;  // S[:, j] . (scale q)
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int64_t a = lane + 32 * i;
    S[i] += kr[i] * u;
    out += (a < K ? scale * to_acc(q[a]) : A(0)) * S[i];
  }
  return ::gdn::cuda::warp_sum(out);
}

}  // namespace gdn::delta_rule::cuda_detail
