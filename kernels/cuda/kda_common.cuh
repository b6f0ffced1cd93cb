// Shared pieces of the CUDA Kimi Delta Attention kernels (kda_recurrent.cu, kda_chunked.cu): sizes
// and the packed-sequence table for device code (the table lives at the head of a workspace), the
// time-major offsets of kernels/kda.h, and the CUDA limits.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/delta_rule_common.cuh"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/kda_cuda.h"

namespace gdn::kda::cuda_detail {

// Every delta-rule family's block-wide helpers (delta_rule_common.cuh): block_gemm (here with
// int64_t indices), warp_dot, and the recurrent forward's warp_column and state-column helpers.
using namespace ::gdn::delta_rule::cuda_detail;

constexpr int kMaxK = 256;  // a warp's registers hold a state column of K rows (recurrent)

// Sizes and the sequence table (device pointers into the workspace) for device code.
struct Dims {
  int64_t H, HV, K, V, C, G, N;
  double scale;
  const int64_t* tok;    // N + 1 token offsets
  const int64_t* chunk;  // N + 1 chunk offsets
  __device__ int64_t qk(int64_t t, int64_t h) const { return (t * H + h) * K; }
  __device__ int64_t vo(int64_t t, int64_t hv) const { return (t * HV + hv) * V; }
  __device__ int64_t gk(int64_t t, int64_t hv) const { return (t * HV + hv) * K; }
  __device__ int64_t bt(int64_t t, int64_t hv) const { return t * HV + hv; }
  // The residual's state at chunk c of value head hv of sequence n.
  __device__ int64_t state_at(int64_t n, int64_t hv, int64_t c) const {
    return (chunk[n] * HV + hv * (chunk[n + 1] - chunk[n]) + c) * K * V;
  }
};

// Acc elements holding the 2 (N + 1) int64 offsets, rounded up to 16.
inline int64_t table_elems(const Problem& p, int64_t in_bytes) {
  const int64_t acc_bytes = in_bytes == 8 ? 8 : 4;
  const int64_t bytes = 2 * (p.num_seqs() + 1) * int64_t(sizeof(int64_t));
  return (bytes / acc_bytes + 15) / 16 * 16;
}

inline int64_t longest_sequence(const Problem& p) {
  if (!p.packed()) return p.T;
  int64_t m = 0;
  for (size_t n = 0; n + 1 < p.cu_seqlens.size(); ++n)
    m = std::max(m, p.cu_seqlens[n + 1] - p.cu_seqlens[n]);
  return m;
}

// Copies the sequence table to the workspace head and returns the device Dims.
template <typename A>
Dims upload_dims(const Problem& p, A* ws, cudaStream_t stream) {
  const gdr::Problem g = p.as_gdr();
  const gdr::Sequences s = gdr::sequences(g);
  std::vector<int64_t> table(s.token);
  table.insert(table.end(), s.chunk.begin(), s.chunk.end());
  int64_t* dev = reinterpret_cast<int64_t*>(ws);
  ::gdn::cuda::upload_async(table.data(), table.size() * sizeof(int64_t), dev, stream);
  const int64_t N = s.count();
  return Dims{p.H, p.HV, p.K, p.V, p.chunk, p.group(), N, p.scale, dev, dev + N + 1};
}

inline void check_limits(const Problem& p) {
  if (p.K > kMaxK)
    throw std::invalid_argument("kda (CUDA): K = " + std::to_string(p.K) +
                                " exceeds the CUDA kernels' maximum key head dim " +
                                std::to_string(kMaxK));
}

// Explicit instantiations of an implementation's CUDA entry points (kda_cuda.h), name_forward and
// name_backward, for float, double and bf16.
#define GDN_KDA_CUDA_INSTANTIATE(name)      \
  GDN_KDA_CUDA_INSTANTIATE_AS(name, float)  \
  GDN_KDA_CUDA_INSTANTIATE_AS(name, double) \
  GDN_KDA_CUDA_INSTANTIATE_AS(name, bf16)
#define GDN_KDA_CUDA_INSTANTIATE_AS(name, T)                                                  \
  template void name##_forward<T>(const Problem&, const Inputs<T>&, const ForwardOutputs<T>&, \
                                  void*);                                                     \
  template void name##_backward<T>(const Problem&, const Inputs<T>&, const BackwardArgs<T>&, void*);

}  // namespace gdn::kda::cuda_detail
