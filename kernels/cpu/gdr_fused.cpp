// The fused gated delta rule on the CPU: one pass over the chunks of each slice with every
// chunk-local matrix in small per-slice buffers (a few C x K tiles, cache resident), no
// full-length intermediates. GEMMs (single-threaded inside the parallel region) do the products.
//
// Forward: threads over (sequence, value head). Backward: threads over (sequence, key head) with
// the value heads of the group inside, chunk-major, so dq and dk of a chunk are summed over the
// group in a fixed order in an fp32/fp64 tile before they are stored. The chunk-start states come
// from the residual (`minimal` policy); everything else is recomputed per chunk. Math:
// docs/design.md, "The gated delta rule".
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gdr_chunk_steps.h"
#include "kernels/cpu/simd.h"

namespace gdn::gdr::detail {

namespace {

using cpu::gemm;

// The scratch of one slice: forward per (sequence, value head), backward per (sequence, key head)
// with the tiles of one value head reused across the group. kq = [k; scale q] (2C x K), kqk = [K
// K^T; Q K^T] (2C x C; in the forward its lower half becomes P), x = [Xw | Xu], wu = [W | U] whose
// U columns become Vn.
template <typename A>
struct Scratch {
  // both directions
  A *kq{}, *kqk{}, *G{}, *gamma{}, *e{}, *beta{}, *a{}, *inv_tmp{}, *x{}, *wu{}, *qg{};
  // forward
  A *o{}, *S{};
  // backward: dqk (the group's), one value head's tiles, then the group's dS' (group x K x V)
  A *dqk{}, *v{}, *d_o{}, *dG{}, *dbeta{}, *s{}, *gam{}, *p{}, *ke{}, *DS{}, *dwu{}, *dpb{}, *da{},
      *t1{}, *xg{}, *col{}, *tmp{}, *dS_new{}, *dS{};
  int64_t used = 0;
  Scratch(const Problem& pr, A* base, bool backward) {
    const int64_t C = pr.chunk, K = pr.K, V = pr.V;
    Carver<A*> c(base);
    kq = c.take(2 * C * K);
    kqk = c.take(2 * C * C);
    if (!backward) {
      c.take_each(C, G, gamma, e, beta);
      a = c.take(C * C);
      inv_tmp = c.take(invert_tmp_elems(C));
      c.take_each(C * (K + V), x, wu);
      qg = c.take(C * K);
      o = c.take(C * V);
      S = c.take(K * V);
    } else {
      dqk = c.take(2 * C * K);
      c.take_each(C * V, v, d_o);
      c.take_each(C, G, gamma, e, beta, dG, dbeta, s);
      c.take_each(C * C, gam, a);
      inv_tmp = c.take(invert_tmp_elems(C));
      p = c.take(C * C);
      c.take_each(C * (K + V), x, wu);
      c.take_each(C * K, qg, ke, DS);
      dwu = c.take(C * (K + V));
      dpb = c.take(2 * C * C);
      c.take_each(C * C, da, t1, xg);
      col = c.take(C);
      tmp = c.take(C * K);
      dS_new = c.take(K * V);
      dS = c.take(pr.group() * K * V);
    }
    used = c.used();
  }
};

// X = [diag(beta gamma) K | diag(beta) V] (v given as C x V rows, ld_v).
template <typename A>
void form_x(int64_t C, int64_t K, int64_t V, const A* k, const A* v, int64_t ld_v, const A* beta,
            const A* gamma, A* x) {
  for (int64_t i = 0; i < C; ++i) {
    A* xi = x + i * (K + V);
    const A bg = beta[i] * gamma[i];
    for (int64_t l = 0; l < K; ++l) xi[l] = bg * k[i * K + l];
    for (int64_t l = 0; l < V; ++l) xi[K + l] = beta[i] * v[i * ld_v + l];
  }
}

// ---- forward ----------------------------------------------------------------------------------

// Loads the keys, gates and v of the chunk at token t0 of value head hv and forms P (in the lower
// half of w.kqk) and Vn (in the U columns of w.wu).
template <typename T, typename A>
ChunkPVn<A> forward_chunk(const Problem& p, const Inputs<T>& in, int64_t hv, int64_t t0,
                          int64_t len, const Scratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KpV = K + V, go = gate_offset(p, t0, hv);
  load_keys(p, in, hv / p.group(), t0, len, true, w.kq, w.kqk);
  const ChunkSegments seg = chunk_segments(p, t0);
  load_gates(in.g + go, in.beta + go, p.HV, len, C, w.G, w.gamma, w.e, w.beta, &seg);
  A* P = w.kqk + C * C;
  // M_ij = beta_i (k_i.k_j) Gam_ij (i > j);  P = (Q K^T) o Gam (i >= j)
  for (int64_t i = 0; i < C; ++i) {
    A* ai = w.a + i * C;
    A* pi = P + i * C;
    const A* kki = w.kqk + i * C;
    A* d = w.inv_tmp;  // Gam_ij, j < i
    decay_row_of(w.G, i, i, &seg, d);
    for (int64_t j = 0; j < i; ++j) {
      ai[j] = w.beta[i] * kki[j] * d[j];
      pi[j] *= d[j];
    }
    for (int64_t j = i; j < C; ++j) ai[j] = 0;
    for (int64_t j = i + 1; j < C; ++j) pi[j] = 0;
  }
  invert_unit_lower(w.a, C, w.inv_tmp);  // A = (I + M)^-1
  // X = [beta gamma K | beta V];  [W | U] = A X;  Vn = U - W S (in the U columns)
  load_rows(in.v + vo_offset(p, t0, hv), p.HV * V, len, V, C, A(1), w.o, V);
  form_x(C, K, V, w.kq, w.o, V, w.beta, w.gamma, w.x);
  gemm(false, false, C, KpV, C, A(1), w.a, C, w.x, KpV, A(0), w.wu, KpV);
  gemm(false, false, C, V, K, A(-1), w.wu, KpV, w.S, V, A(1), w.wu + K, KpV);
  return ChunkPVn<A>{P, w.wu + K, KpV};
}

// One forward slice (sequence, value head): forward_walk with forward_chunk.
template <typename T, typename A>
GDN_CPU_CLONES_FLAT void forward_slice(const Problem& p, const Inputs<T>& in,
                                       const ForwardOutputs<T>& out, const Slice& s,
                                       const Scratch<A>& w) {
  forward_walk(p, in, out, s, w, forward_chunk<T, A>);
}

// ---- backward ---------------------------------------------------------------------------------

// Recomputes the forward of value head hv's chunk from its start state S: loads v, dO and the
// gates; Gam; M (strict lower) -> A = (I + M)^-1, P = (Q K^T) o Gam, X, [W | U], Vn (in the U
// columns), gamma Q, e K. The keys must be loaded.
template <typename T, typename A>
void recompute_chunk(const Problem& p, const Inputs<T>& in, const T* d_o, int64_t hv, int64_t t0,
                     int64_t len, const A* S, const Scratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KpV = K + V, go = gate_offset(p, t0, hv);
  const A *k = w.kq, *qs = w.kq + C * K, *KK = w.kqk, *QK = w.kqk + C * C;
  load_rows(in.v + vo_offset(p, t0, hv), p.HV * V, len, V, C, A(1), w.v, V);
  load_rows(d_o + vo_offset(p, t0, hv), p.HV * V, len, V, C, A(1), w.d_o, V);
  const ChunkSegments seg = chunk_segments(p, t0);
  load_gates(in.g + go, in.beta + go, p.HV, len, C, w.G, w.gamma, w.e, w.beta, &seg);
  decay_matrix(w.G, C, w.gam, &seg);
  for (int64_t i = 0; i < C; ++i) {
    const A* gi = w.gam + i * C;
    for (int64_t l = 0; l < i; ++l) w.a[i * C + l] = w.beta[i] * KK[i * C + l] * gi[l];
    for (int64_t l = i; l < C; ++l) w.a[i * C + l] = 0;
    for (int64_t l = 0; l < C; ++l) w.p[i * C + l] = QK[i * C + l] * gi[l];
  }
  invert_unit_lower(w.a, C, w.inv_tmp);
  form_x(C, K, V, k, w.v, V, w.beta, w.gamma, w.x);
  gemm(false, false, C, KpV, C, A(1), w.a, C, w.x, KpV, A(0), w.wu, KpV);
  gemm(false, false, C, V, K, A(-1), w.wu, KpV, S, V, A(1), w.wu + K, KpV);
  for (int64_t i = 0; i < C; ++i)
    for (int64_t l = 0; l < K; ++l) {
      w.qg[i * K + l] = w.gamma[i] * qs[i * K + l];
      w.ke[i * K + l] = w.e[i] * k[i * K + l];
    }
}

// dVn = diag(e) K dS' + P^T dO;  s_i = e_i k_i . (dS' vn_i) = (diag(e) K dS')_i . vn_i;
// dS = gamma_C dS' + (diag(gamma) Q)^T dO - W^T dVn (into dS_new). Returns <S, dS'>.
template <typename A>
A value_and_state_grads(const Problem& p, const A* S, const A* dSp, const Scratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KpV = K + V;
  const A* vn = w.wu + K;
  A* dvn = w.dwu + K;
  gemm(false, false, C, V, K, A(1), w.ke, K, dSp, V, A(0), dvn, KpV);
  for (int64_t i = 0; i < C; ++i) w.s[i] = dot(dvn + i * KpV, vn + i * KpV, V);
  gemm(true, false, C, V, C, A(1), w.p, C, w.d_o, V, A(1), dvn, KpV);
  gemm(true, false, K, V, C, A(1), w.qg, K, w.d_o, V, A(0), w.dS_new, V);
  gemm(true, false, K, V, C, A(-1), w.wu, KpV, dvn, KpV, A(1), w.dS_new, V);
  return carry_state_grad(p, w.gamma[C - 1], S, dSp, w.dS_new);
}

// dW = -dVn S^T (dU = dVn);  dA = [dW | dU] X^T;  [dXw | dXu] = A^T [dW | dU] (over X); then
// dK += beta gamma dXw;  dV = beta dXu (to dv);  dbeta = gamma dXw.k + dXu.v;  a += beta gamma
// dXw.k
template <typename T, typename A>
void wy_grads(const Problem& p, const BackwardArgs<T>& args, int64_t hv, int64_t t0, int64_t len,
              const A* S, const Scratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KpV = K + V;
  const A* k = w.kq;
  A* dk = w.dqk + C * K;
  gemm(false, true, C, K, V, A(-1), w.dwu + K, KpV, S, V, A(0), w.dwu, KpV);
  gemm(false, true, C, C, KpV, A(1), w.dwu, KpV, w.x, KpV, A(0), w.da, C);
  A* dx = w.x;  // X is no longer needed
  gemm(true, false, C, KpV, C, A(1), w.a, C, w.dwu, KpV, A(0), dx, KpV);
  for (int64_t i = 0; i < C; ++i) {
    const A* dxw = dx + i * KpV;
    const A* dxu = dxw + K;
    const A bg = w.beta[i] * w.gamma[i];
    const A xk = dot(dxw, k + i * K, K);
    for (int64_t l = 0; l < K; ++l) dk[i * K + l] += bg * dxw[l];
    w.dbeta[i] = w.gamma[i] * xk + dot(dxu, w.v + i * V, V);
    w.dG[i] += bg * xk;
  }
  for (int64_t i = 0; i < len; ++i)
    store_rows(dx + i * KpV + K, KpV, 1, V, w.beta[i], args.dv + vo_offset(p, t0 + i, hv), V);
}

// dM = strictly_lower(-A^T dA A^T);  dbeta += rowsum(dM o Gam o KK);  Bsym = B + B^T with
// B = diag(beta) (dM o Gam);  X += dM o M;  then [dQ; dK] += [dPG; Bsym] K.
template <typename A>
void decay_grads(const Problem& p, const Scratch<A>& w) {
  const int64_t C = p.chunk, K = p.K;
  const A* KK = w.kqk;
  gemm(false, true, C, C, C, A(1), w.da, C, w.a, C, A(0), w.t1, C);
  gemm(true, false, C, C, C, A(-1), w.a, C, w.t1, C, A(0), w.da, C);
  A* bsym = w.dpb + C * C;
  for (int64_t i = 0; i < C; ++i) {
    const A *dm = w.da + i * C, *gam = w.gam + i * C, *kk = KK + i * C;
    A *b = bsym + i * C, *xg = w.xg + i * C;
    w.dbeta[i] += lane_sum<A>(i, [&](int64_t l) { return dm[l] * gam[l] * kk[l]; });
    for (int64_t l = 0; l < i; ++l) {
      b[l] = w.beta[i] * (dm[l] * gam[l]);
      xg[l] += b[l] * kk[l];  // dM_il * M_il
    }
    b[i] = 0;
  }
  for (int64_t i = 0; i < C; ++i)  // the upper half: Bsym is symmetric
    for (int64_t l = 0; l < i; ++l) bsym[l * C + i] = bsym[i * C + l];
  gemm(false, false, 2 * C, K, C, A(1), w.dpb, C, w.kq, K, A(1), w.dqk, K);
}

// Value head j of key head h at the chunk at token t0 (chunk-start state S): recompute, then its
// part of [dQ; dK] (into w.dqk), its dv, dg, dbeta, and its dS (into w.dS_new).
template <typename T, typename A>
void value_head_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                         int64_t h, int64_t j, const A* S, int64_t t0, int64_t len,
                         const Scratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, KpV = K + V;
  const int64_t hv = h * p.group() + j, go = gate_offset(p, t0, hv);
  const A* dSp = w.dS + j * KV;  // dS' (gradient of the chunk-end state)
  recompute_chunk(p, in, args.d_o, hv, t0, len, S, w);
  // dG = a + rowsum(X) - colsum(X) (+ c at the end), X strictly lower: see store_gate_grad.
  query_state_grad(p, w.d_o, S, w.qg, w.gamma, w.DS, w.dG, w.dqk);
  const A state_dot = value_and_state_grads(p, S, dSp, w);
  add_state_key_grad(p, w.wu + K, KpV, dSp, w.e, w.tmp, w.dqk + C * K);
  // dK += dPG^T Q here;  dQ += dPG K comes with the symmetric dM term (decay_grads)
  score_grads(p, w.d_o, w.wu + K, KpV, w.p, w.gam, w.kq + C * K, w.dpb, w.xg, w.dqk + C * K);
  wy_grads(p, args, hv, t0, len, S, w);
  decay_grads(p, w);
  store_chunk_gate_grad(w.dG, w.xg, w.s, w.gamma[C - 1] * state_dot, len, C, w.col, args.dg + go,
                        p.HV);
  for (int64_t i = 0; i < len; ++i) args.dbeta[go + i * p.HV] = from_acc<T>(w.dbeta[i]);
}

// Key slice kh = (sequence, key head) with the value heads of its group (backward_walk).
template <typename T, typename A>
GDN_CPU_CLONES_FLAT void backward_slice(const Problem& p, const Inputs<T>& in,
                                        const BackwardArgs<T>& args, const Slice& kh,
                                        const Scratch<A>& w) {
  backward_walk(p, in, args, kh, true, w.kqk, w, value_head_backward<T, A>);
}

}  // namespace

GDN_GDR_DEFINE_BY_SLICES(fused, Scratch, chunk_sequences)

}  // namespace gdn::gdr::detail
