// The ssd baseline on the CPU: scalar-decay linear attention without the delta rule (no beta),
//   S = exp(g_t) S + k_t v_t^T;  o_t = S^T (scale q_t)
// chunked as the gated delta rule (Vn = V, no W, U, A), one fused pass per slice with chunk
// tiles in per-slice buffers, so the bench shows what the delta rule costs. Per chunk:
//   O = (gamma Q) S + ((Q K^T) o Gam) V,   S' = gamma_C S + K^T (e o V)
// Threads: forward over (sequence, value head); backward over (sequence, key head) with the group
// inside, so dq and dk are summed over the group in a fixed order. dbeta is written as zeros.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gdr_chunk_steps.h"
#include "kernels/cpu/simd.h"

namespace gdn::gdr::detail {

namespace {

using cpu::gemm;

// The scratch of one slice (kernels/gdr_workspace_layout.h).
template <typename A>
using Scratch = SsdScratch<A*>;

// Loads the keys, gates and v of the chunk at token t0 of value head hv and forms
// P = (Q K^T) o Gam (lower, diagonal included; over Q K^T); Vn is V.
template <typename T, typename A>
ChunkPVn<A> forward_chunk(const Problem& p, const Inputs<T>& in, int64_t hv, int64_t t0,
                          int64_t len, const Scratch<A>& w) {
  const int64_t C = p.chunk, V = p.V;
  load_keys(p, in, hv / p.group(), t0, len, false, w.kq, w.qk);
  const ChunkSegments seg = chunk_segments(p, t0);
  load_gates(in.g + gate_offset(p, t0, hv), static_cast<const T*>(nullptr), p.HV, len, C, w.G,
             w.gamma, w.e, static_cast<A*>(nullptr), &seg);
  load_rows(in.v + vo_offset(p, t0, hv), p.HV * V, len, V, C, A(1), w.v, V);
  for (int64_t i = 0; i < C; ++i) {
    A* d = w.o;  // Gam_ij, j <= i (o is written later)
    decay_row_of(w.G, i, i + 1, &seg, d);
    for (int64_t j = 0; j <= i; ++j) w.qk[i * C + j] *= d[j];
    for (int64_t j = i + 1; j < C; ++j) w.qk[i * C + j] = 0;
  }
  return ChunkPVn<A>{w.qk, w.v, V};
}

// One forward slice (sequence, value head): forward_walk with forward_chunk.
template <typename T, typename A>
GDN_CPU_CLONES_FLAT void forward_slice(const Problem& p, const Inputs<T>& in,
                                       const ForwardOutputs<T>& out, const Slice& s,
                                       const Scratch<A>& w) {
  forward_walk(p, in, out, s, w, forward_chunk<T, A>);
}

// Value head j of key head h at the chunk at token t0 (chunk-start state S): its part of
// [dQ; dK] (into w.dqk), its dv, dg, and its dS (into w.dS_new). The keys (k, scale q, Q K^T)
// must be loaded.
template <typename T, typename A>
void value_head_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                         int64_t h, int64_t j, const A* S, int64_t t0, int64_t len,
                         const Scratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V;
  const int64_t hv = h * p.group() + j, go = gate_offset(p, t0, hv);
  const A* dSp = w.dS + j * KV;
  const A *k = w.kq, *qs = w.kq + C * K;
  A *dq = w.dqk, *dk = w.dqk + C * K;
  load_rows(in.v + vo_offset(p, t0, hv), p.HV * V, len, V, C, A(1), w.v, V);
  load_rows(args.d_o + vo_offset(p, t0, hv), p.HV * V, len, V, C, A(1), w.d_o, V);
  const ChunkSegments seg = chunk_segments(p, t0);
  load_gates(in.g + go, static_cast<const T*>(nullptr), p.HV, len, C, w.G, w.gamma, w.e,
             static_cast<A*>(nullptr), &seg);
  decay_matrix(w.G, C, w.gam, &seg);
  for (int64_t l = 0; l < C * C; ++l) w.p[l] = w.qk[l] * w.gam[l];
  for (int64_t i = 0; i < C; ++i)
    for (int64_t l = 0; l < K; ++l) {
      w.qg[i * K + l] = w.gamma[i] * qs[i * K + l];
      w.ke[i * K + l] = w.e[i] * k[i * K + l];
    }
  // dG = a + rowsum(X) - colsum(X) (+ c at the end), X strictly lower: see store_gate_grad.
  query_state_grad(p, w.d_o, S, w.qg, w.gamma, w.DS, w.dG, dq);
  // dV = diag(e) K dS' + P^T dO;  s_i = e_i k_i . (dS' v_i)
  gemm(false, false, C, V, K, A(1), w.ke, K, dSp, V, A(0), w.dv, V);
  for (int64_t i = 0; i < C; ++i) w.s[i] = dot(w.dv + i * V, w.v + i * V, V);
  gemm(true, false, C, V, C, A(1), w.p, C, w.d_o, V, A(1), w.dv, V);
  store_rows(w.dv, V, len, V, A(1), args.dv + vo_offset(p, t0, hv), p.HV * V);
  // dS = gamma_C dS' + (diag(gamma) Q)^T dO
  gemm(true, false, K, V, C, A(1), w.qg, K, w.d_o, V, A(0), w.dS_new, V);
  const A state_dot = carry_state_grad(p, w.gamma[C - 1], S, dSp, w.dS_new);
  add_state_key_grad(p, w.v, V, dSp, w.e, w.tmp, dk);
  score_grads(p, w.d_o, w.v, V, w.p, w.gam, qs, w.dp, w.xg, dk);
  gemm(false, false, C, K, C, A(1), w.dp, C, k, K, A(1), dq, K);  // dQ += dPG K
  store_chunk_gate_grad(w.dG, w.xg, w.s, w.gamma[C - 1] * state_dot, len, C, w.col, args.dg + go,
                        p.HV);
}

// Key slice kh = (sequence, key head) with the value heads of its group (backward_walk); their
// dbeta is zero (no delta rule).
template <typename T, typename A>
GDN_CPU_CLONES_FLAT void backward_slice(const Problem& p, const Inputs<T>& in,
                                        const BackwardArgs<T>& args, const Slice& kh,
                                        const Scratch<A>& w) {
  const int64_t h = kh.head;
  if (args.dbeta)
    for (int64_t t = kh.tok0; t < kh.tok0 + kh.len; ++t)
      for (int64_t j = 0; j < p.group(); ++j)
        args.dbeta[gate_offset(p, t, h * p.group() + j)] = from_acc<T>(A(0));
  backward_walk(p, in, args, kh, false, w.qk, w, value_head_backward<T, A>);
}

}  // namespace

GDN_GDR_DEFINE_BY_SLICES(ssd, Scratch, chunk_sequences)

}  // namespace gdn::gdr::detail
