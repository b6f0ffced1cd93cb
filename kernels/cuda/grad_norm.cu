// CUDA fp64 sum of squares in two passes: kSumSquaresWorkspace blocks (at most) each reduce a
// grid-stride slice in shared memory, then one block reduces the partials. The grid depends
// only on n, so the same input gives the same bits every run.
#include <cuda_runtime.h>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/grad_norm.h"

namespace gdn::cuda {

namespace {

constexpr int kThreads = 256;  // a power of two, = kSumSquaresWorkspace (stage 2 is one block)
static_assert(kThreads == kSumSquaresWorkspace, "stage 2 reduces one partial per thread");

__device__ __forceinline__ double widen(double x) {
  return x;
}
template <typename T>
__device__ __forceinline__ double widen(T x) {
  return double(float(x));
}

// Tree reduction of one value per thread in shared memory; thread 0 returns the sum.
__device__ double block_sum(double v) {
  __shared__ double buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  return buf[0];
}

template <typename T>
__global__ void partial_sum_squares_kernel(const T* x, int64_t n, double* partial) {
  double s = 0.0;
  GDN_GRID_LOOP(i, n) {
    const double v = widen(x[i]);
    s += v * v;
  }
  const double total = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void final_sum_kernel(const double* partial, int count, double* out) {
  const double total = block_sum(int(threadIdx.x) < count ? partial[threadIdx.x] : 0.0);
  if (threadIdx.x == 0) *out = total;
}

}  // namespace

template <typename T>
void sum_squares(const T* x, int64_t n, double* workspace, double* out, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int64_t want = (n + kThreads - 1) / kThreads;
  const int blocks = int(want < kSumSquaresWorkspace ? want : kSumSquaresWorkspace);
  if (blocks > 0) partial_sum_squares_kernel<T><<<blocks, kThreads, 0, s>>>(x, n, workspace);
  final_sum_kernel<<<1, kThreads, 0, s>>>(workspace, blocks, out);
  GDN_KCUDA_LAUNCHED("sum_squares");
}

template void sum_squares<float>(const float*, int64_t, double*, double*, void*);
template void sum_squares<double>(const double*, int64_t, double*, double*, void*);
template void sum_squares<bf16>(const bf16*, int64_t, double*, double*, void*);
template void sum_squares<fp16>(const fp16*, int64_t, double*, double*, void*);

}  // namespace gdn::cuda
