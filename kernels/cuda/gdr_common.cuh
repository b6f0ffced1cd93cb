// Shared pieces of the CUDA gated delta rule (gdr_recurrent.cu, gdr_chunked*.cu, gdr_ssd.cu,
// gdr_dispatch.cu): problem sizes as a plain struct kernels can take by value, the time-major
// offsets of gated_delta_rule.h, block-wide helpers (a small row-major GEMM, the in-chunk gate
// gradient), the scratch layouts (kernels/gdr_workspace_layout.h, carved as on the CPU), and the
// entry points of each implementation.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/delta_rule_common.cuh"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/gdr_fused_plan.h"
#include "kernels/cuda/gdr_seqs.h"
#include "kernels/cuda/kernel_math.h"
#include "kernels/cuda/launch_math.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/gdr_workspace_layout.h"

namespace gdn::gdr::cuda_detail {

using namespace ::gdn::cuda;  // device_util.cuh: reductions, acc_exp, checks
using detail::ChunkedLayout;
using detail::ChunkedSide;

// Problem sizes for device code; NT chunks of C steps (of an unpacked row), G value heads per key
// head; `seqs` the sequences (recurrent and ssd: one grid over all of them).
struct Dims {
  int64_t B, T, H, HV, K, V, C, NT, G;
  double scale;
  cuda_seqs::SeqTable seqs;
  // Offsets of token t (counted over all B T tokens, as cuda_seqs::SeqSpan::t0).
  __host__ __device__ int64_t qk(int64_t t, int64_t h) const { return (t * H + h) * K; }
  __host__ __device__ int64_t vo(int64_t t, int64_t hv) const { return (t * HV + hv) * V; }
  __host__ __device__ int64_t gate(int64_t t, int64_t hv) const { return t * HV + hv; }
  // The residual's state at chunk c of value head hv of sequence q ([sequence][head][chunk]).
  __host__ __device__ int64_t state_at(const cuda_seqs::SeqSpan& q, int64_t hv, int64_t c) const {
    return detail::chunk_tile(q.c0, cuda_seqs::chunks_of(q.len, C), HV, hv, c) * K * V;
  }
  __host__ __device__ int64_t qk(int64_t b, int64_t t, int64_t h) const {
    return ((b * T + t) * H + h) * K;
  }
  __host__ __device__ int64_t vo(int64_t b, int64_t t, int64_t hv) const {
    return ((b * T + t) * HV + hv) * V;
  }
  __host__ __device__ int64_t gate(int64_t b, int64_t t, int64_t hv) const {
    return (b * T + t) * HV + hv;
  }
  // The key slice (b * H + h) of value slice s = b * HV + hv.
  __host__ __device__ int64_t key_slice(int64_t s) const { return (s / HV) * H + (s % HV) / G; }
};

// spans: a packed Problem's table in device memory (upload_seq_table); null without packing.
inline Dims dims_of(const Problem& p, const cuda_seqs::SeqSpan* spans = nullptr) {
  return Dims{p.B,
              p.T,
              p.H,
              p.HV,
              p.K,
              p.V,
              p.chunk,
              p.num_chunks(),
              p.group(),
              p.scale,
              cuda_seqs::seq_table(p, spans)};
}

// Copies a packed Problem's sequence table (cuda_seqs::seq_spans) to dst in the workspace on
// `stream` and returns it; null without packing (gdr_seq_table.cu).
const cuda_seqs::SeqSpan* upload_seq_table(const Problem& p, void* dst, cudaStream_t stream);

// The CUDA limits of every implementation (recurrent: K in the registers of a warp, 8 rows per
// lane; its backward's step vectors in shared memory).
constexpr int64_t kMaxK = 256, kMaxV = 512;

// Every delta-rule family's block-wide helpers (delta_rule_common.cuh): block_gemm (here with
// int indices), warp_dot, and the recurrent forward's warp_column and state-column helpers.
using namespace ::gdn::delta_rule::cuda_detail;

// dg of one padded chunk (the CPU's store_gate_grad, same summation order): with
//   dG_i = a_i + rowsum(X)_i - colsum(X)_i (+ c at i = C-1), X strictly lower, G the cumsum of g,
//   dg_t = sum_{i >= t} a_i + c + sum_{j < t} sum_{i >= t} X_ij   (kernel_math.h: gate_grad_at),
// summed directly (the row and column sums cancel under strong decay). Thread t < C writes dg_t
// when t < rows; no synchronisation inside.
template <typename T, typename A>
__device__ void gate_grad_store(const A* a, const A* X, A c, int rows, int C, T* dg,
                                int64_t stride) {
  const int t = threadIdx.x;
  if (t < C && t < rows) dg[t * stride] = from_acc<T>(gate_grad_at(t, a, X, c, C));
}

// Offsets (Acc elements) of the recurrent backward's per-key-slice scratch: the CPU's layout
// without the step vectors, which live in shared memory.
// A block's dq, dk cover one sequence: the longest (T unpacked).
using RecurrentBackwardLayout = detail::RecurrentScratch<int64_t>;
inline RecurrentBackwardLayout recurrent_backward_layout(const Problem& p) {
  Problem longest = p;
  longest.T = cuda_seqs::longest_seq(p);
  return RecurrentBackwardLayout(longest, 0, true, false);
}

// Blocks of the recurrent and ssd backward, one scratch slice each: one per key slice (b, h)
// unpacked; packed, the (sequence, key head) pairs share at most kPackedSlots blocks, each taking
// pair blockIdx.x, + gridDim.x, ... (so many short sequences do not multiply the scratch).
constexpr int64_t kPackedSlots = 128;
inline int64_t backward_slots(const Problem& p) {
  return p.packed() ? std::min(p.num_seqs() * p.H, kPackedSlots) : p.B * p.H;
}

// Offsets of the ssd backward's per-key-slice scratch: the tiles of kernels/cpu/gdr_ssd.cpp's
// backward, one chunk of one key slice at a time.
using SsdBackwardLayout = detail::SsdScratch<int64_t>;
inline SsdBackwardLayout ssd_backward_layout(const Problem& p) {
  return SsdBackwardLayout(p, 0, true);
}

// Workspace (Acc elements) of each implementation (with the sequence table of a packed Problem
// where the kernels take it); the forward of recurrent and ssd needs only the table.
int64_t chunked_workspace(const Problem& p, bool backward);
int64_t recurrent_forward_workspace(const Problem& p);
int64_t recurrent_backward_workspace(const Problem& p);
int64_t ssd_backward_workspace(const Problem& p);
// The fused kernels' plan on the current device (gdr_fused.cu) for inputs of in_bytes.
fused::Plan fused_plan(const Problem& p, bool backward, int64_t in_bytes);

// Entry points; inputs were validated by gdr_dispatch.cu. The forward of `recurrent` also serves
// `ssd` (ssd = true: no delta rule), whose backward is its own chunked kernel.
template <typename T>
void recurrent_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                       bool ssd, cudaStream_t stream);
template <typename T>
void recurrent_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                        cudaStream_t stream);
template <typename T>
void chunked_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                     cudaStream_t stream);
template <typename T>
void chunked_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                      cudaStream_t stream);
template <typename T>
void ssd_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                  cudaStream_t stream);
template <typename T>
void fused_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                   cudaStream_t stream);
template <typename T>
void fused_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                    cudaStream_t stream);

#define GDN_GDR_CUDA_INSTANTIATE_FWD(name, ...)                                                    \
  template void name<float>(const Problem&, const Inputs<float>&, const ForwardOutputs<float>&,    \
                            __VA_ARGS__);                                                          \
  template void name<double>(const Problem&, const Inputs<double>&, const ForwardOutputs<double>&, \
                             __VA_ARGS__);                                                         \
  template void name<bf16>(const Problem&, const Inputs<bf16>&, const ForwardOutputs<bf16>&,       \
                           __VA_ARGS__);
#define GDN_GDR_CUDA_INSTANTIATE_BWD(name)                                                       \
  template void name<float>(const Problem&, const Inputs<float>&, const BackwardArgs<float>&,    \
                            cudaStream_t);                                                       \
  template void name<double>(const Problem&, const Inputs<double>&, const BackwardArgs<double>&, \
                             cudaStream_t);                                                      \
  template void name<bf16>(const Problem&, const Inputs<bf16>&, const BackwardArgs<bf16>&,       \
                           cudaStream_t);

}  // namespace gdn::gdr::cuda_detail
