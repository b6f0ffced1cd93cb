// The chunked (WY / UT) gated delta rule on the CPU: every chunk-level intermediate (A, W, U, Vn,
// P, Gam and their gradients) is materialised over the full length in the workspace, and the work
// runs as a few passes over all (slice, chunk) pairs, parallel over chunks as well as slices,
// around the two inter-chunk recurrences (Vn, S' forward; dVn, dS backward) that run chunk after
// chunk per slice. Each pass is chunk-major (all GEMMs of one chunk back to back, then its
// element-wise work), so a chunk's tiles stay in cache between products. A slice is a
// (sequence, head) pair: packed sequences (cu_seqlens) with states are chunked from their own
// first token, so their chunks are ordinary chunks and a pass simply runs over all of them;
// without states they share the unpacked row's chunks, boundaries masked (ChunkSegments).
//
// Residual `minimal`: the chunk-start states; the backward recomputes A, W, U, Vn, P.
// Residual `full`: the states, then A and [W | U] of every chunk, which the backward reuses.
// With GVA the per-value-head dq, dk go to the workspace and are summed over the group in a
// fixed order at the end (deterministic). Math and notation: docs/design.md, "The gated delta
// rule".
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gdr_internal.h"
#include "kernels/trace_events.h"

namespace gdn::gdr::detail {

namespace {

using cpu::gemm;

// The buffers, every one [sequence][head][chunk] of chunk tiles (detail::chunk_tile), are the
// CUDA kernels' layout (kernels/gdr_workspace_layout.h) with Vn over U under `minimal`.
template <typename A>
using Buffers = ChunkedLayout<A>;

// body(i) for i in [0, n) in parallel under a static schedule, each worker traced as `name` (the
// caller's __func__).
template <class Body>
void parallel_for(const char* name, int64_t n, const Body& body) {
#pragma omp parallel
  {
    GDN_TRACE_WORKER(name);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}

// Chunk c of head `head` of sequence n, tile i of a [sequence][head][chunk] buffer of `heads`
// heads: its first token t0 and real rows len.
struct ChunkSpan {
  int64_t n, head, c, t0, len;
};
inline ChunkSpan chunk_span(const Sequences& seqs, int64_t heads, int64_t C, int64_t i) {
  const ChunkAt at = chunk_at(seqs, heads, i);
  const int64_t t0 = seqs.token[at.n] + at.c * C;
  return ChunkSpan{at.n, at.head, at.c, t0, std::min(C, seqs.token[at.n + 1] - t0)};
}

// The tiles of value chunk i (chunk c of value head hv of sequence n) and of its key chunk.
template <typename A>
struct Tiles {
  int64_t i, n, hv, c, t0, len, go;
  const A *k, *qs, *KK, *QK;
  A *v, *G, *gamma, *e, *beta, *a, *P, *x, *wu, *qg, *ke, *vn;
  Tiles(const Problem& p, const Sequences& seqs, const Buffers<A>& w, int64_t index) : i(index) {
    const int64_t C = p.chunk, K = p.K, V = p.V;
    const ChunkSpan at = chunk_span(seqs, p.HV, C, i);
    n = at.n;
    hv = at.head;
    c = at.c;
    t0 = at.t0;
    len = at.len;
    go = gate_offset(p, t0, hv);
    const int64_t ki = chunk_tile(seqs.chunk[n], seqs.chunks(n), p.H, hv / p.group(), c);
    k = w.kq + ki * 2 * C * K;
    qs = k + C * K;
    KK = w.kqk + ki * 2 * C * C;
    QK = KK + C * C;
    v = w.v + i * C * V;
    G = w.G + i * C;
    gamma = w.gamma + i * C;
    e = w.e + i * C;
    beta = w.beta + i * C;
    a = w.a + i * C * C;
    P = w.p + i * C * C;
    x = w.x + i * C * (K + V);
    wu = w.wu + i * C * (K + V);
    qg = w.qg + i * C * K;
    ke = w.ke + i * C * K;
    vn = w.vn + i * C * w.ld_vn;
  }
};

// Loads q, k of every key chunk, padded;  [KK; QK] = [k; q] k^T.
template <typename T, typename A>
void load_keys(const Problem& p, const Sequences& seqs, const Inputs<T>& in, const Buffers<A>& w) {
  const int64_t C = p.chunk, K = p.K;
  parallel_for(__func__, p.H * seqs.total_chunks(), [&](int64_t i) {
    const ChunkSpan at = chunk_span(seqs, p.H, C, i);
    A* kq = w.kq + i * 2 * C * K;
    load_rows(in.k + qk_offset(p, at.t0, at.head), p.H * K, at.len, K, C, A(1), kq, K);
    load_rows(in.q + qk_offset(p, at.t0, at.head), p.H * K, at.len, K, C, A(p.scale), kq + C * K,
              K);
    gemm(false, true, 2 * C, C, K, A(1), kq, K, kq, K, A(0), w.kqk + i * 2 * C * C, C);
  });
}

// One value chunk: loads v, the gates (and dO when d_o is given), padded; Gam (kept when gam is
// given); unless `have_a`: M -> A = (I + M)^-1 and [W | U] = A X; always P = QK o Gam,
// X = [beta gamma K | beta V], gamma Q, e K.
template <typename T, typename A>
void prepare_chunk(const Problem& p, const Inputs<T>& in, const T* d_o, const Buffers<A>& w,
                   const Tiles<A>& t, bool have_a, A* gam) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KpV = K + V;
  const int64_t vo = vo_offset(p, t.t0, t.hv);
  load_rows(in.v + vo, p.HV * V, t.len, V, C, A(1), t.v, V);
  if (d_o) load_rows(d_o + vo, p.HV * V, t.len, V, C, A(1), w.d_o + t.i * C * V, V);
  const ChunkSegments seg = chunk_segments(p, t.t0);
  load_gates(in.g + t.go, in.beta + t.go, p.HV, t.len, C, t.G, t.gamma, t.e, t.beta, &seg);
  A gam_local[64 * 64];
  A* g_ij = gam ? gam : gam_local;
  decay_matrix(t.G, C, g_ij, &seg);  // Gam, exponents <= 0
  for (int64_t r = 0; r < C; ++r) {
    const A* gr = g_ij + r * C;
    if (!have_a) {
      for (int64_t l = 0; l < r; ++l) t.a[r * C + l] = t.beta[r] * t.KK[r * C + l] * gr[l];
      for (int64_t l = r; l < C; ++l) t.a[r * C + l] = 0;
    }
    for (int64_t l = 0; l < C; ++l) t.P[r * C + l] = t.QK[r * C + l] * gr[l];
  }
  for (int64_t r = 0; r < C; ++r) {
    for (int64_t l = 0; l < K; ++l) {
      t.x[r * KpV + l] = t.beta[r] * t.gamma[r] * t.k[r * K + l];
      t.qg[r * K + l] = t.gamma[r] * t.qs[r * K + l];
      t.ke[r * K + l] = t.e[r] * t.k[r * K + l];
    }
    for (int64_t l = 0; l < V; ++l) t.x[r * KpV + K + l] = t.beta[r] * t.v[r * V + l];
  }
  if (!have_a) {
    A inv_tmp[16 * 64];
    invert_unit_lower(t.a, C, inv_tmp);
    gemm(false, false, C, KpV, C, A(1), t.a, C, t.x, KpV, A(0), t.wu, KpV);
  }
}

// Vn = U where Vn has its own tiles (with the `full` residual U stays there).
template <typename A>
void copy_u(const Problem& p, const Buffers<A>& w, const Tiles<A>& t) {
  const int64_t K = p.K, V = p.V;
  if (t.vn != t.wu + K)
    for (int64_t r = 0; r < p.chunk; ++r)
      std::memcpy(t.vn + r * V, t.wu + r * (K + V) + K, V * sizeof(A));
}

// ---- forward ----------------------------------------------------------------------------------

// The recurrence over the chunks of each value slice (sequence, value head), from its h0 row to
// its ht row: Vn = U - W S;  S' = gamma_C S + (e K)^T Vn.
template <typename T, typename A>
void forward_recurrence(const Problem& p, const Sequences& seqs, const Inputs<T>& in,
                        const ForwardOutputs<T>& out, const Buffers<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, KpV = K + V;
  parallel_for(__func__, seqs.count() * p.HV, [&](int64_t si) {
    const Slice s = slice_of(seqs, p.HV, si);
    A* S = out.residual + s.tile(p.HV, s.head, 0) * KV;
    copy_or_zero(S, p.has_h0 ? in.h0 + si * KV : nullptr, KV);
    for (int64_t c = 0; c < s.chunks; ++c) {
      const Tiles<A> t(p, seqs, w, s.tile(p.HV, s.head, c));
      copy_u(p, w, t);
      gemm(false, false, C, V, K, A(-1), t.wu, KpV, S, V, A(1), t.vn, w.ld_vn);
      A* S_next = c + 1 < s.chunks ? S + KV : (p.want_ht ? out.ht + si * KV : nullptr);
      if (!S_next) break;
      const A gamma_c = t.gamma[C - 1];
      for (int64_t l = 0; l < KV; ++l) S_next[l] = gamma_c * S[l];
      gemm(true, false, K, V, C, A(1), t.ke, K, t.vn, w.ld_vn, A(1), S_next, V);
      S = S_next;
    }
  });
}

// O = (gamma Q) S + P Vn per chunk, into the v tile (v is no longer needed), stored.
template <typename T, typename A>
void store_outputs(const Problem& p, const Sequences& seqs, const ForwardOutputs<T>& out,
                   const Buffers<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V;
  parallel_for(__func__, p.HV * seqs.total_chunks(), [&](int64_t i) {
    const Tiles<A> t(p, seqs, w, i);
    A* o = t.v;
    gemm(false, false, C, V, K, A(1), t.qg, K, out.residual + i * KV, V, A(0), o, V);
    gemm(false, false, C, V, C, A(1), t.P, C, t.vn, w.ld_vn, A(1), o, V);
    store_rows(o, V, t.len, V, A(1), out.o + vo_offset(p, t.t0, t.hv), p.HV * V);
  });
}

// ---- backward ---------------------------------------------------------------------------------

// Recompute per chunk (A, [W | U] come from the residual under `full`), Vn = U - W S;
// dVn = P^T dO (+ diag(e) K dS' in state_grad_recurrence), in the right columns of dWU;
// dSloc = (gamma Q)^T dO.
template <typename T, typename A>
void recompute_chunks(const Problem& p, const Sequences& seqs, const Inputs<T>& in,
                      const BackwardArgs<T>& args, const Buffers<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, KpV = K + V;
  const bool have_a = p.residual == Residual::full;
  parallel_for(__func__, p.HV * seqs.total_chunks(), [&](int64_t i) {
    const Tiles<A> t(p, seqs, w, i);
    prepare_chunk(p, in, args.d_o, w, t, have_a, w.gam + i * C * C);
    copy_u(p, w, t);  // under `full` U stays in the residual: Vn has its own tiles
    gemm(false, false, C, V, K, A(-1), t.wu, KpV, args.residual + i * KV, V, A(1), t.vn, w.ld_vn);
    const A* d_o = w.d_o + i * C * V;
    gemm(true, false, C, V, C, A(1), t.P, C, d_o, V, A(0), w.dwu + i * C * KpV + K, KpV);
    gemm(true, false, K, V, C, A(1), t.qg, K, d_o, V, A(0), w.dSloc + i * KV, V);
  });
}

// The recurrence in reverse over the chunks of each value slice (sequence, value head), from its
// dht row to its dh0 row: dVn += diag(e) K dS';  dS = gamma_C dS' + dSloc - W^T dVn.
// dSend[c] keeps dS' of chunk c; dSloc[c] becomes dS of chunk c (= dS' of chunk c - 1).
template <typename T, typename A>
void state_grad_recurrence(const Problem& p, const Sequences& seqs, const BackwardArgs<T>& args,
                           const Buffers<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, KpV = K + V;
  parallel_for(__func__, seqs.count() * p.HV, [&](int64_t si) {
    const Slice s = slice_of(seqs, p.HV, si);
    for (int64_t c = s.chunks - 1; c >= 0; --c) {
      const int64_t i = s.tile(p.HV, s.head, c);
      A* dSp = w.dSend + i * KV;
      // dS' of chunk c: dS of chunk c + 1, or dht after the last chunk (zero without it)
      const A* next =
          c + 1 < s.chunks ? w.dSloc + (i + 1) * KV : (args.dht ? args.dht + si * KV : nullptr);
      copy_or_zero(dSp, next, KV);
      A* dvn = w.dwu + i * C * KpV + K;
      gemm(false, false, C, V, K, A(1), w.ke + i * C * K, K, dSp, V, A(1), dvn, KpV);
      A* dS = w.dSloc + i * KV;
      gemm(true, false, K, V, C, A(-1), w.wu + i * C * KpV, KpV, dvn, KpV, A(1), dS, V);
      const A gamma_c = w.gamma[i * C + C - 1];
      for (int64_t l = 0; l < KV; ++l) dS[l] += gamma_c * dSp[l];
    }
    if (p.has_h0)
      std::memcpy(args.dh0 + si * KV, w.dSloc + s.tile(p.HV, s.head, 0) * KV, KV * sizeof(A));
  });
}

// The chunk-local products of value chunk t: dP = dO Vn^T;  DS = dO S^T (dQ rows of dqk);
// Vn dS'^T (dK rows);  dW = -dVn S^T;  dA = [dW | dU] X^T;  dX = A^T [dW | dU] (over X);
// dM = -A^T (dA A^T) (strictly lower part used; T1 = dA A^T in Bsym's place).
template <typename A>
void chunk_products(const Problem& p, const Buffers<A>& w, const Tiles<A>& t, const A* S,
                    const A* dSp) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KpV = K + V, i = t.i;
  const A* d_o = w.d_o + i * C * V;
  A *DS = w.dqk + i * 2 * C * K, *dkv = DS + C * K;
  A *dP = w.dpb + i * 2 * C * C, *t1 = dP + C * C;
  A *dwu = w.dwu + i * C * KpV, *dvn = dwu + K, *dM = w.da + i * C * C, *dx = t.x;
  gemm(false, true, C, C, V, A(1), d_o, V, t.vn, w.ld_vn, A(0), dP, C);
  gemm(false, true, C, K, V, A(1), d_o, V, S, V, A(0), DS, K);
  gemm(false, true, C, K, V, A(1), t.vn, w.ld_vn, dSp, V, A(0), dkv, K);
  gemm(false, true, C, K, V, A(-1), dvn, KpV, S, V, A(0), dwu, KpV);
  gemm(false, true, C, C, KpV, A(1), dwu, KpV, t.x, KpV, A(0), dM, C);
  gemm(true, false, C, KpV, C, A(1), t.a, C, dwu, KpV, A(0), dx, KpV);
  gemm(false, true, C, C, C, A(1), dM, C, t.a, C, A(0), t1, C);
  gemm(true, false, C, C, C, A(-1), t.a, C, t1, C, A(0), dM, C);
}

// The element-wise gradients of value chunk t (after chunk_products): dv, dg, dbeta; dQ, dK in
// the value head's tile of dqk; dPG = dP o Gam and Bsym = B + B^T, B = diag(beta) (dM o Gam),
// in dpb; then [dQ; dK] += [dPG; Bsym] K and dK += dPG^T Q.
template <typename T, typename A>
void chunk_grads(const Problem& p, const BackwardArgs<T>& args, const Buffers<A>& w,
                 const Tiles<A>& t, const A* S, const A* dSp) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, KpV = K + V, i = t.i;
  const A *k = t.k, *KK = t.KK, *gamma = t.gamma, *e = t.e, *beta = t.beta, *P = t.P, *v = t.v;
  const A* gam = w.gam + i * C * C;
  A *DS = w.dqk + i * 2 * C * K, *dkv = DS + C * K;   // [dQ; dK] of this value head
  A *dP = w.dpb + i * 2 * C * C, *bsym = dP + C * C;  // [dP (then dPG); Bsym]
  const A *dM = w.da + i * C * C, *dx = t.x;
  A dG[64], sv[64], X[64 * 64];  // per-chunk scratch (C <= 64)
  // dG = a + rowsum(X) - colsum(X) (+ c at the end), X strictly lower: see store_gate_grad.
  for (int64_t r = 0; r < C; ++r) {
    // s_r = e_r k_r . (dS' vn_r);  dK = diag(e) Vn dS'^T;  a = (gamma q) . DS;  dQ = gamma DS
    sv[r] = e[r] * dot(dkv + r * K, k + r * K, K);
    dG[r] = dot(t.qg + r * K, DS + r * K, K);
    for (int64_t l = 0; l < K; ++l) {
      dkv[r * K + l] *= e[r];
      DS[r * K + l] *= gamma[r];
    }
  }
  A dbeta[64];
  for (int64_t r = 0; r < C; ++r) {
    // dK += beta gamma dXw;  dV = beta dXu;  dbeta = gamma dXw.k + dXu.v;  a += beta gamma dXw.k
    const A* dxw = dx + r * KpV;
    const A bg = beta[r] * gamma[r], xk = dot(dxw, k + r * K, K);
    for (int64_t l = 0; l < K; ++l) dkv[r * K + l] += bg * dxw[l];
    dbeta[r] = gamma[r] * xk + dot(dxw + K, v + r * V, V);
    dG[r] += bg * xk;
    if (r < t.len)
      store_rows(dxw + K, KpV, 1, V, beta[r], args.dv + vo_offset(p, t.t0 + r, t.hv), V);
    bsym[r * C + r] = 0;
    // X = dP o P (strictly lower; the diagonal cancels);  dPG = dP o Gam
    for (int64_t l = 0; l < r; ++l) X[r * C + l] = dP[r * C + l] * P[r * C + l];
    for (int64_t l = 0; l < C; ++l) dP[r * C + l] *= gam[r * C + l];
    for (int64_t l = 0; l < r; ++l) {
      // dbeta += rowsum(dM o Gam o KK);  X += dM o M
      const A dmg = dM[r * C + l] * gam[r * C + l];
      dbeta[r] += dmg * KK[r * C + l];
      const A bl = beta[r] * dmg;
      bsym[r * C + l] = bl;
      bsym[l * C + r] = bl;
      X[r * C + l] += bl * KK[r * C + l];
    }
  }
  A col[64];
  store_chunk_gate_grad(dG, X, sv, gamma[C - 1] * dot(S, dSp, KV), t.len, C, col, args.dg + t.go,
                        p.HV);
  for (int64_t r = 0; r < t.len; ++r) args.dbeta[t.go + r * p.HV] = from_acc<T>(dbeta[r]);
  // [dQ; dK] += [dPG; Bsym] K;  dK += dPG^T Q  (k, q of the key head)
  gemm(false, false, 2 * C, K, C, A(1), dP, C, k, K, A(1), DS, K);
  gemm(true, false, C, K, C, A(1), dP, C, t.qs, K, A(1), dkv, K);
}

// Sum over the value heads of each group, in order: dq = scale sum_j dQ_j, dk = sum_j dK_j.
template <typename T, typename A>
void sum_group_grads(const Problem& p, const Sequences& seqs, const BackwardArgs<T>& args,
                     const Buffers<A>& w) {
  const int64_t C = p.chunk, K = p.K;
  parallel_for(__func__, p.H * seqs.total_chunks(), [&](int64_t i) {
    const ChunkSpan at = chunk_span(seqs, p.H, C, i);
    const int64_t chunks = seqs.chunks(at.n), h = at.head, t0 = at.t0, len = at.len;
    // the value chunk of j = 0; value head j's is `chunks` tiles further
    const int64_t first = chunk_tile(seqs.chunk[at.n], chunks, p.HV, h * p.group(), at.c);
    A sum_q[256], sum_k[256];  // one row at a time (K <= 256)
    for (int64_t r = 0; r < len; ++r) {
      for (int64_t l = 0; l < K; ++l) sum_q[l] = sum_k[l] = 0;
      for (int64_t j = 0; j < p.group(); ++j) {
        const A* dq_row = w.dqk + ((first + j * chunks) * 2 * C + r) * K;
        const A* dk_row = dq_row + C * K;
        for (int64_t l = 0; l < K; ++l) {
          sum_q[l] += dq_row[l];
          sum_k[l] += dk_row[l];
        }
      }
      store_rows(sum_q, K, 1, K, A(p.scale), args.dq + qk_offset(p, t0 + r, h), K);
      store_rows(sum_k, K, 1, K, A(1), args.dk + qk_offset(p, t0 + r, h), K);
    }
  });
}

}  // namespace

int64_t chunked_forward_workspace(const Problem& p) {
  return Buffers<float>(chunk_problem(p), nullptr, nullptr, false, ChunkedSide::cpu).used;
}
int64_t chunked_backward_workspace(const Problem& p) {
  return Buffers<float>(chunk_problem(p), nullptr, nullptr, true, ChunkedSide::cpu).used;
}

template <typename T>
void chunked_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out) {
  using A = acc_t<T>;
  const Sequences seqs = chunk_sequences(p);
  const Buffers<A> w(chunk_problem(p), out.workspace, out.residual, false, ChunkedSide::cpu);
  load_keys(p, seqs, in, w);
  parallel_for(__func__, p.HV * seqs.total_chunks(), [&](int64_t i) {
    prepare_chunk(p, in, static_cast<const T*>(nullptr), w, Tiles<A>(p, seqs, w, i), false,
                  static_cast<A*>(nullptr));
  });
  forward_recurrence(p, seqs, in, out, w);
  store_outputs(p, seqs, out, w);
}

template <typename T>
void chunked_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) {
  using A = acc_t<T>;
  const int64_t KV = p.K * p.V;
  const Sequences seqs = chunk_sequences(p);
  const Buffers<A> w(chunk_problem(p), args.workspace, const_cast<A*>(args.residual), true,
                     ChunkedSide::cpu);
  load_keys(p, seqs, in, w);
  recompute_chunks(p, seqs, in, args, w);
  state_grad_recurrence(p, seqs, args, w);
  // Everything else is chunk-local.
  parallel_for(__func__, p.HV * seqs.total_chunks(), [&](int64_t i) {
    const Tiles<A> t(p, seqs, w, i);
    const A *S = args.residual + i * KV, *dSp = w.dSend + i * KV;
    chunk_products(p, w, t, S, dSp);
    chunk_grads(p, args, w, t, S, dSp);
  });
  sum_group_grads(p, seqs, args, w);
}

GDN_DELTA_RULE_INSTANTIATE(chunked)

}  // namespace gdn::gdr::detail
