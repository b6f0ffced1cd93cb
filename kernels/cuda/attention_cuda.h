// Causal softmax attention on CUDA (kernels/cuda/attention.cu): the CPU kernel's semantics and
// layouts (kernels/cpu/attention.h: q, o [B, T, H, D], k, v [B, T, HKV, D], lse [B, H, T] in
// acc_t<T>, window, GQA, packed sequences), FlashAttention-2 style, SIMT fp32 (fp64 for double)
// math; the plan (tile size, shared memory) is kernels/cuda/attention_plan.h. A plain C++ header
// (no CUDA), for the op that allocates the buffers and for tests.
//
// Kernels never allocate: the caller sizes the workspace with the functions below (acc_t<T>
// elements; the CUDA kernels keep different scratch from the CPU's) and passes device pointers.
// The forward's workspace holds the tile table of packed sequences (copied there from the host on
// `stream`; nothing unpacked); the backward's the table, then Delta [B, H, T]. Results are
// deterministic: every output element is summed by one thread in a fixed order (no atomics).
#pragma once
#include <cstdint>

#include "kernels/cpu/attention.h"
#include "kernels/numeric.h"

namespace gdn::attn {

int64_t cuda_forward_workspace_elems(const Problem& p);
int64_t cuda_backward_workspace_elems(const Problem& p);

// T is float, bf16 (fp32 math) or double (fp64 math). `stream` is a cudaStream_t.
template <typename T>
void forward_cuda(const Problem& p, const T* q, const T* k, const T* v, T* o, acc_t<T>* lse,
                  acc_t<T>* workspace, void* stream);

template <typename T>
void backward_cuda(const Problem& p, const T* q, const T* k, const T* v, const T* o,
                   const acc_t<T>* lse, const T* d_o, T* dq, T* dk, T* dv, acc_t<T>* workspace,
                   void* stream);

}  // namespace gdn::attn
