// Device helpers shared by the CUDA kernels of reduce.cu, nn.cu, gemm.cu and gdr_*.cu: error
// checks that throw (kernels know nothing of src/core), library handles per stream,
// exp/log/rsqrt/cos/sin in the accumulator type, and deterministic warp and block reductions (a
// fixed tree, never atomics: the same input gives the same bits on every run).
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/numeric.h"

namespace gdn::cuda {

inline cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}

// Throws std::runtime_error naming the failing expression and CUDA's message.
#define GDN_KCUDA_CHECK(expr)                                                          \
  do {                                                                                 \
    cudaError_t gdn_kerr_ = (expr);                                                    \
    if (gdn_kerr_ != cudaSuccess)                                                      \
      throw std::runtime_error(std::string("CUDA error in ") + #expr + ": " +          \
                               cudaGetErrorString(gdn_kerr_) + " (" + __FILE__ + ":" + \
                               std::to_string(__LINE__) + ")");                        \
  } while (0)

// After a launch: reports a bad launch configuration at the call that made it, naming the kernel
// (and clears it, so later launches are not blamed for it).
#define GDN_KCUDA_LAUNCHED(what)                                                       \
  do {                                                                                 \
    cudaError_t gdn_kerr_ = cudaGetLastError();                                        \
    if (gdn_kerr_ != cudaSuccess)                                                      \
      throw std::runtime_error(std::string("CUDA error launching ") + (what) + ": " +  \
                               cudaGetErrorString(gdn_kerr_) + " (" + __FILE__ + ":" + \
                               std::to_string(__LINE__) + ")");                        \
  } while (0)

// A library handle (cuBLAS, cuDNN) for the current device and `stream`, made by create(stream)
// on first use: one per (host thread, device, stream), since a handle must not be used by two
// host threads at once and is bound to one stream. Handles live until the process exits
// (destroying them during static destruction, after the CUDA runtime may be gone, fails).
template <typename Handle, class Create>
Handle handle_per_stream(cudaStream_t stream, const Create& create) {
  int device = 0;
  GDN_KCUDA_CHECK(cudaGetDevice(&device));
  thread_local std::map<std::pair<int, cudaStream_t>, Handle> handles;
  const auto key = std::make_pair(device, stream);
  auto it = handles.find(key);
  if (it == handles.end()) it = handles.emplace(key, create(stream)).first;
  return it->second;
}

// for (int64_t i ...) over [0, n): a grid-stride loop, the thread's items i = its global index
// + k * (the grid's threads).
#define GDN_GRID_LOOP(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// acc_exp, acc_log, acc_rsqrt, acc_cos, acc_sin: the math function of the accumulator type A
// (float or double; the fp32 one for float, never a silent widening).
#define GDN_ACC_MATH(name, f32, f64)                                      \
  template <typename A>                                                   \
  __device__ __forceinline__ A name(A x) {                                \
    static_assert(std::is_same_v<A, float> || std::is_same_v<A, double>,  \
                  #name " takes the accumulator type (float or double)"); \
    if constexpr (std::is_same_v<A, float>)                               \
      return f32(x);                                                      \
    else                                                                  \
      return f64(x);                                                      \
  }
GDN_ACC_MATH(acc_exp, expf, exp)
GDN_ACC_MATH(acc_log, logf, log)
GDN_ACC_MATH(acc_rsqrt, 1.0f / sqrtf, 1.0 / sqrt)
GDN_ACC_MATH(acc_cos, cosf, cos)
GDN_ACC_MATH(acc_sin, sinf, sin)
#undef GDN_ACC_MATH

// Sum over the 32 lanes of a warp (butterfly, a fixed order); every lane gets the result.
template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// Reduces v over the block by `op` (blockDim.x a power of two <= kMaxBlock) in a fixed tree in
// shared memory `shm` (blockDim.x elements); every thread gets the result. All threads must call
// it.
template <typename A, class Op>
__device__ A block_reduce(A v, A* shm, const Op& op) {
  const unsigned t = threadIdx.x;
  shm[t] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) shm[t] = op(shm[t], shm[t + s]);
    __syncthreads();
  }
  const A r = shm[0];
  __syncthreads();  // shm may be reused right after
  return r;
}

// Sum over the block (block_reduce).
template <typename A>
__device__ A block_sum(A v, A* shm) {
  return block_reduce(v, shm, [](A a, A b) { return a + b; });
}

// Max over the block with std::max's rule (a < b ? b : a): NaN never wins a comparison, as on the
// CPU, whose softmax max skips NaN (the NaN still reaches the sum of exponentials).
template <typename A>
__device__ A block_max(A v, A* shm) {
  return block_reduce(v, shm, [](A a, A b) { return a < b ? b : a; });
}

constexpr int kMaxBlock = 256;  // the largest block the reductions above are used with

// Copies `bytes` from host memory `src` to device memory `dst` in order on `stream` through a
// pinned staging ring (gdr_seq_table.cu): the host never waits for the stream (as a copy from
// pageable memory may), and src may be freed on return. For the small tables kernels read from
// their workspace (packed sequences).
void upload_async(const void* src, size_t bytes, void* dst, cudaStream_t stream);

}  // namespace gdn::cuda
