// The fused CUDA gated delta rule run on the CPU: every block of the grid in turn, each through
// the very block code the GPU runs (gdr_fused_block.h) with a BlockExec that runs its threads one
// by one, forward or reversed (a race between the threads of a phase shows as a difference
// between the two orders). Shared memory is refilled with NaN before each block (a pattern that
// is NaN as fp32 and in both bf16 halves), so a read of anything the block has not written
// poisons the result. bf16 products go through the
// tensor-core fragment code and an exact model of mma.sync (block_exec.h). Slow; for tests and
// the kernel development loop, not for use.
#pragma once
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cuda/gdr_fused_block.h"

namespace gdn::gdr::fused {

template <typename A>
A poison() {
  if constexpr (sizeof(A) == 4) return bits_float(0x7fc07fc0u);  // bf16 NaN in both halves
  return std::numeric_limits<A>::quiet_NaN();
}

// vt: the V tile; sub: the kernel's chunk (0: p.chunk; Plan::sub). A packed Problem runs as on
// the GPU: one grid over (sequence, value head, V tile), its sequence table in host memory.
template <typename T>
void emulate_forward(const Problem& p, int64_t vt, const Inputs<T>& in,
                     const gdr::ForwardOutputs<T>& out, bool reversed, int64_t sub = 0) {
  using A = acc_t<T>;
  const std::vector<cuda_seqs::SeqSpan> spans = cuda_seqs::seq_spans(p);
  const Dims d = dims_of(p, vt, sub, spans.empty() ? nullptr : spans.data());
  const ForwardArgs<T> args{in.q, in.k, in.v, in.g, in.beta, in.h0, out.o, out.ht, out.residual};
  std::vector<A> smem(ForwardLayout(d.C, d.K, d.vt, sizeof(T)).total);
  const cuda::BlockExec ex = cuda::BlockExec::host(kThreads, reversed);
  for (int64_t block = 0; block < d.blocks(); ++block) {
    std::fill(smem.begin(), smem.end(), poison<A>());
    forward_block<T>(ex, d, args, smem.data(), block);
  }
}

// `a.workspace` must hold backward_workspace(p, sizeof(T), sub) elements. Its running sums start as
// NaN (a sum read before a block wrote it poisons the gradients), its flags as zero; each block
// takes its place by ticket, as on the GPU, and a wait for a flag no earlier block has released
// (the GPU's deadlock) throws.
template <typename T>
void emulate_backward(const Problem& p, int64_t vt, const Inputs<T>& in,
                      const gdr::BackwardArgs<T>& a, bool reversed, int64_t sub = 0) {
  using A = acc_t<T>;
  const std::vector<cuda_seqs::SeqSpan> spans = cuda_seqs::seq_spans(p);
  const Dims d = dims_of(p, vt, sub, spans.empty() ? nullptr : spans.data());
  const BackwardArgs<T> args{in.q,        in.k, in.v, in.g, in.beta, a.d_o,   a.dht, a.residual,
                             a.workspace, a.dq, a.dk, a.dv, a.dg,    a.dbeta, a.dh0};
  const BackwardWorkspace w(d, sizeof(A));
  std::fill_n(a.workspace, w.flags, poison<A>());
  std::fill_n(reinterpret_cast<int*>(a.workspace + w.flags), w.flag_words, 0);
  std::vector<A> smem(BackwardLayout(d.C, d.K, d.vt, kThreads, sizeof(T)).total);
  const cuda::BlockExec ex = cuda::BlockExec::host(kThreads, reversed);
  for (int64_t n = 0; n < d.blocks(); ++n) {
    std::fill(smem.begin(), smem.end(), poison<A>());
    backward_block<T>(ex, d, args, smem.data());
  }
}

}  // namespace gdn::gdr::fused
