// How the fused CUDA gated delta rule (gdr_fused.cu) covers a Problem: one thread block per
// (batch, value head, V tile of vt columns) walks the chunks with the state tile and every
// chunk-local matrix in shared memory. This header holds the host arithmetic of that plan
// (which sub-chunk and vt fit the device's shared memory, the shared-memory layout of each
// kernel, the grid) as plain C++, so the CPU tests check it and the emulator uses it
// (tests/test_fused_emulation).
//
// Sub-chunks: where the Problem's chunk does not fit (C = 64 on a 99 KiB part such as the RTX
// 3090, K = 256 fp32), the kernels step through it in R sub-chunks of C / R rows, the same math
// at a finer blocking. The residual keeps the Problem's chunk-start states: the forward saves
// every R-th state, and the backward recomputes the states inside a chunk from its start (sub-chunk
// r costs r forward state updates, R (R - 1) / 2 per chunk: one at R = 2).
//
// Shared memory, in accumulator elements (C the (sub-)chunk, K the key dim, vt the V tile); [k;
// scale q] stays in the input type (bf16 inputs: half the bytes, and what the tensor cores read
// anyway):
//   forward:  S (K x vt), [k; scale q] (2C x K), KK o Gam, P, A (C x C), the inversion's
//             16 x C block row, Y, gamma Q S, Vn (C x vt), five C-vectors of gates.
//   backward: S, dS (K x vt), [k; scale q], KK o Gam, P, A, dP o Gam, X (the gate term), dA
//             (C x C), Yr, gamma K S, dVn, dO, K dS' (then Z), Vn (C x vt), nine C-vectors,
//             one partial sum per thread, the block's ticket.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/cuda/gdr_seqs.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/gdr_workspace_layout.h"
#include "kernels/numeric.h"

namespace gdn::gdr::fused {

constexpr int kThreads = 256;  // 8 warps per block

// Problem sizes as device code needs them: C the kernel's (sub-)chunk, NT() = ceil(T / C) steps
// and NR = ceil(T / (R C)) residual states of an unpacked row of T tokens, R sub-chunks per chunk
// of the residual; vt columns of V per block, NVT = V / vt tiles. The grid covers (sequence,
// value head, V tile); seq(n) gives each sequence's tokens and first chunk (packed: the table;
// unpacked: B rows of T). Tokens are counted over all B T (qk, vo, gate take one).
struct Dims {
  int64_t B, T, H, HV, K, V, C, R, NR, G, vt, NVT;
  double scale;
  int64_t N, TC;                    // sequences; the Problem's chunks over all of them
  const cuda_seqs::SeqSpan* spans;  // packed: the table (device memory); null: B rows of T
  GDN_HD int64_t NT() const { return (T + C - 1) / C; }
  GDN_HD cuda_seqs::SeqSpan seq(int64_t n) const {
    return spans ? spans[n] : cuda_seqs::SeqSpan{n * T, T, n * NR};
  }
  GDN_HD int64_t qk(int64_t t, int64_t h) const { return (t * H + h) * K; }
  GDN_HD int64_t vo(int64_t t, int64_t hv) const { return (t * HV + hv) * V; }
  GDN_HD int64_t gate(int64_t t, int64_t hv) const { return t * HV + hv; }
  GDN_HD int64_t slices() const { return N * HV; }
  GDN_HD int64_t blocks() const { return N * HV * NVT; }
  // Kernel steps of a sequence, and the residual's chunks (R steps each).
  GDN_HD int64_t steps(const cuda_seqs::SeqSpan& q) const { return cuda_seqs::chunks_of(q.len, C); }
  GDN_HD int64_t chunks(const cuda_seqs::SeqSpan& q) const {
    return cuda_seqs::chunks_of(q.len, R * C);
  }
  // Offset of the residual's state (K x V) at the start of step c (a multiple of R) of value
  // head hv of sequence q: [sequence][head][chunk] (detail::chunk_tile).
  GDN_HD int64_t state_at(const cuda_seqs::SeqSpan& q, int64_t hv, int64_t c) const {
    return detail::chunk_tile(q.c0, chunks(q), HV, hv, c / R) * K * V;
  }
  // The backward's flags of key head h of sequence q, one per step: [sequence][head][R chunk].
  GDN_HD int64_t flags_at(const cuda_seqs::SeqSpan& q, int64_t h) const {
    return detail::chunk_tile(q.c0 * R, chunks(q) * R, H, h, 0);
  }
};

// The rows of one kernel step: tokens tok .. tok + rows - 1 (rows <= C; the step's other rows
// are padding, zero in every load).
struct StepRows {
  int64_t tok, rows;
};
GDN_HD StepRows step_rows(const Dims& d, const cuda_seqs::SeqSpan& q, int64_t c) {
  const int64_t left = q.len - c * d.C;
  return StepRows{q.t0 + c * d.C, left < d.C ? left : d.C};
}

// The kernels' chunk for sub, a divisor of p.chunk (0: p.chunk itself).
inline int64_t kernel_chunk(const Problem& p, int64_t sub) {
  return sub > 0 ? sub : p.chunk;
}

// spans: the packed Problem's sequence table where the kernels read it (device memory, or host
// memory for the emulator); null without packing, and where only sizes are wanted.
inline Dims dims_of(const Problem& p, int64_t vt, int64_t sub = 0,
                    const cuda_seqs::SeqSpan* spans = nullptr) {
  const int64_t C = kernel_chunk(p, sub);
  return Dims{p.B,  p.T,      p.H,         p.HV,           p.K,
              p.V,  C,        p.chunk / C, p.num_chunks(), p.group(),
              vt,   p.V / vt, p.scale,     p.num_seqs(),   p.total_chunks(),
              spans};
}
// The block code captures Dims by value in many lambdas: over 128 bytes the compiler no longer
// keeps it in scalars, and the backward kernels' registers grew by a third (halving their
// resident blocks where shared memory allowed two).
static_assert(sizeof(Dims) <= 128, "fused::Dims must stay within 128 bytes");

// Bytes of an accumulator for inputs of in_bytes (bf16 accumulates in fp32).
GDN_HD int64_t acc_bytes_of(int64_t in_bytes) {
  return in_bytes < 4 ? 4 : in_bytes;
}
// Accumulator elements that hold [k; scale q] (2C x K) in the input type.
GDN_HD int64_t key_tile_elems(int64_t C, int64_t K, int64_t in_bytes) {
  return 2 * C * K * in_bytes / acc_bytes_of(in_bytes);
}

// Offsets (accumulator elements, multiples of 16) of the forward kernel's shared buffers.
struct ForwardLayout {
  int64_t S, kq, kkg, p, a, tinv, y, og, vn, gl, G, gamma, e, beta, total;
  GDN_HD ForwardLayout(int64_t C, int64_t K, int64_t vt, int64_t in_bytes) {
    detail::Carver<int64_t> c;
    S = c.take(K * vt);
    kq = c.take(key_tile_elems(C, K, in_bytes));
    c.take_each(C * C, kkg, p, a);
    tinv = c.take(16 * C);
    c.take_each(C * vt, y, og, vn);
    c.take_each(C, gl, G, gamma, e, beta);
    total = c.used();
  }
};

// Offsets of the backward kernel's shared buffers (the inversion's block row lives in dpg, which
// is dead until dP is formed; Z is written over K dS', dVn over gamma Q S o dO).
struct BackwardLayout {
  int64_t S, dS, kq, kkg, p, a, dpg, xg, da, yr, ksg, qd, dO, kd, vn;
  int64_t gl, G, gamma, e, beta, avec, svec, zy, zk, red, consts, ticket, total;
  GDN_HD BackwardLayout(int64_t C, int64_t K, int64_t vt, int64_t threads, int64_t in_bytes) {
    detail::Carver<int64_t> c;
    c.take_each(K * vt, S, dS);
    kq = c.take(key_tile_elems(C, K, in_bytes));
    c.take_each(C * C, kkg, p, a, dpg, xg, da);
    c.take_each(C * vt, yr, ksg, qd, dO, kd, vn);
    c.take_each(C, gl, G, gamma, e, beta, avec, svec, zy, zk);
    red = c.take(threads);
    consts = c.take(1);  // gamma_C <S, dS'>
    ticket = c.take(1);  // an int: the block's ticket (BlockExec::claim_ticket)
    total = c.used();
  }
};

// The plan of one kernel (forward or backward) for a Problem on a device.
struct Plan {
  bool ok = false;
  std::string why;  // when !ok: what does not fit or is not supported
  int64_t sub = 0;  // the kernel's chunk: p.chunk, or a divisor where p.chunk does not fit
  int64_t vt = 0, tiles = 0, blocks = 0, smem_bytes = 0;
  int threads = kThreads;
};

// Shared memory of a kernel for inputs of in_bytes (2 bf16, 4 fp32, 8 fp64), at the kernel
// chunk sub (0: p.chunk).
inline int64_t smem_bytes(const Problem& p, int64_t vt, bool backward, int64_t in_bytes,
                          int64_t sub = 0) {
  const int64_t C = kernel_chunk(p, sub);
  const int64_t elems = backward ? BackwardLayout(C, p.K, vt, kThreads, in_bytes).total
                                 : ForwardLayout(C, p.K, vt, in_bytes).total;
  return elems * acc_bytes_of(in_bytes);
}

// Multiply-adds of one block over one step of `sub` rows (C x C x K products of the keys, the
// vt-wide products, the inversion), for the choice of vt: a narrower tile means more blocks but
// repeats the vt-independent work in each of them. The backward at R = p.chunk / sub > 1 adds
// its recomputed states: (R - 1) / 2 forward state updates per step.
inline double block_macs(const Problem& p, int64_t vt, bool backward, int64_t sub = 0) {
  const double C = double(kernel_chunk(p, sub)), K = double(p.K), w = double(vt);
  const double R = double(p.chunk) / C;
  if (!backward) return 2 * C * C * K + C * C * C / 3 + (3 * C * K + 2 * C * C) * w;
  const double state_update = C * C * K + C * C * C / 3 + (2 * C * K + C * C) * w;
  return 5 * C * C * K + 7 * C * C * C / 3 + (8 * C * K + 5 * C * C) * w +
         (R - 1) / 2 * state_update;
}

// Picks the kernel's chunk and vt. The chunk is p.chunk when some V tile fits smem_limit (the
// device's opt-in shared memory per block), else the largest of p.chunk / 2, p.chunk / 4, ...
// (at least 16) that does: the multiply-add count would always favour small chunks, but each
// step costs barriers and smaller tensor-core tiles the count does not see, so the Problem's
// chunk is kept wherever it fits. vt among 64, 32, 16 (dividing V) by the least predicted time
// on `sms` multiprocessors: waves of resident blocks (as many per multiprocessor as its shared
// memory and, given regs_per_thread > 0, its 64K registers hold) times the multiply-adds of a
// block (blocks sharing a multiprocessor share its throughput). vt_override / sub_override > 0
// force one. Unsupported sizes (K or V not a multiple of 16) and shapes that fit no tile give
// ok = false with the reason.
inline Plan plan(const Problem& p, bool backward, int64_t in_bytes, int64_t smem_limit, int64_t sms,
                 int64_t vt_override = 0, int64_t regs_per_thread = 0, int64_t sub_override = 0) {
  Plan pl;
  if (p.K % 16 != 0 || p.V % 16 != 0) {
    pl.why = "K and V must be multiples of 16 (K " + std::to_string(p.K) + ", V " +
             std::to_string(p.V) + ")";
    return pl;
  }
  int64_t best = 0, best_sub = 0;
  for (int64_t sub = p.chunk; sub >= 16 && best == 0; sub /= 2) {
    if (p.chunk % sub != 0 || (sub_override > 0 && sub != sub_override)) continue;
    double best_time = 0;
    for (int64_t vt : {int64_t(64), int64_t(32), int64_t(16)}) {
      if (p.V % vt != 0 || (vt_override > 0 && vt != vt_override)) continue;
      const int64_t bytes = smem_bytes(p, vt, backward, in_bytes, sub);
      if (bytes > smem_limit) continue;
      const int64_t blocks = p.num_seqs() * p.HV * (p.V / vt);
      int64_t per_sm = (smem_limit + 1024) / (bytes + 1024);  // resident blocks per multiprocessor
      per_sm = std::min(per_sm, int64_t(2048 / kThreads));
      if (regs_per_thread > 0) per_sm = std::min(per_sm, 65536 / (regs_per_thread * kThreads));
      per_sm = std::max(per_sm, int64_t(1));
      const int64_t slots = sms * per_sm, waves = (blocks + slots - 1) / slots;
      const int64_t sharing = std::min(per_sm, (blocks + sms - 1) / sms);
      const double time = double(waves * sharing) * block_macs(p, vt, backward, sub);
      if (best == 0 || time < best_time) {
        best = vt;
        best_sub = sub;
        best_time = time;
      }
    }
  }
  if (best == 0) {
    pl.why = "no V tile fits " + std::to_string(smem_limit) + " bytes of shared memory (C " +
             std::to_string(p.chunk) + " or sub-chunks of it down to 16, K " + std::to_string(p.K) +
             ", " + std::to_string(in_bytes * 8) + "-bit inputs" +
             (vt_override > 0 ? ", vt " + std::to_string(vt_override) : std::string()) +
             (sub_override > 0 ? ", sub-chunk " + std::to_string(sub_override) : std::string()) +
             ")";
    return pl;
  }
  pl.ok = true;
  pl.sub = best_sub;
  pl.vt = best;
  pl.tiles = p.V / best;
  pl.blocks = p.num_seqs() * p.HV * pl.tiles;
  pl.smem_bytes = smem_bytes(p, best, backward, in_bytes, best_sub);
  return pl;
}

// The backward's workspace, in accumulator elements (acc_bytes each): running sums of dq, dk
// [B, T, H, K] and dg, dbeta [B, T, HV], then int32 flags (one per kernel step: [sequence][key
// head][R chunk], R per chunk of the residual) and the ticket counter, which must be zero at
// launch. The blocks of a key head's group (value head j of G, V tile of NVT) add their parts
// step by step in the fixed order j * NVT + tile: a flag counts the blocks that have added its
// step, and the last one writes the gradients. One set of sums whatever the V tiling, instead of
// a partial per tile. A packed Problem's table follows (cuda_seqs::with_seq_table).
struct BackwardWorkspace {
  int64_t dq, dk, dg, dbeta, flags, counter, flag_words, elems;
  GDN_HD BackwardWorkspace(const Dims& d, int64_t acc_bytes) {
    const int64_t keys = d.B * d.T * d.H * d.K, gates = d.B * d.T * d.HV;
    dq = 0;
    dk = keys;
    dg = 2 * keys;
    dbeta = dg + gates;
    flags = dbeta + gates;       // acc elements before the flags
    counter = d.H * d.TC * d.R;  // int32 index of the counter among the flags
    flag_words = counter + 1;
    elems = flags + (flag_words * 4 + acc_bytes - 1) / acc_bytes;
  }
};

// For the backward at kernel chunk sub (0: p.chunk; Plan::sub).
inline int64_t backward_workspace(const Problem& p, int64_t in_bytes, int64_t sub = 0) {
  return BackwardWorkspace(dims_of(p, p.V, sub), acc_bytes_of(in_bytes)).elems;
}

}  // namespace gdn::gdr::fused
