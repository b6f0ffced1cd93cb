// The chunked (WY / UT) gated delta rule on the CPU, as a framework would run it: batched GEMMs
// over every (slice, chunk) and small element-wise passes, each phase over the full length, with
// the chunk-level intermediates materialised in the workspace. Only the inter-chunk recurrence
// (Vn and S' in the forward, dVn and dS in the backward) runs chunk after chunk, per slice.
//
// Residual `minimal`: the chunk-start states; the backward recomputes A, W, U, Vn, P.
// Residual `full`: the states, then A and [W | U] of every chunk, which the backward reuses.
// With GVA the per-value-head dq, dk go to the workspace and are summed over the group in a
// fixed order at the end (deterministic). Math and notation: DESIGN.md section 3.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gdr_internal.h"

namespace gdn::gdr::detail {

namespace {

using cpu::gemm;
using cpu::gemm_strided_batched;

// Every buffer is [slice][NT][chunk tile]: value slices (b, hv) unless noted as key slices (b, h).
template <typename A>
struct Buffers {
  // forward and recompute
  A *kq, *kqk;                       // key slices: [k; scale q] (2C x K), [KK; QK] (2C x C)
  A *v, *G, *gamma, *e, *beta;       // C x V, C each
  A *a, *p, *x, *wu, *qg, *ke, *vn;  // A, P (C x C), [Xw | Xu], [W | U], gamma Q, e K, Vn
  // backward only
  A *d_o, *gam, *dqk, *dSloc, *dSend, *dwu, *dpb, *da, *t1, *xg, *dG, *s;
  int64_t used = 0;

  Buffers(const Problem& pr, A* ws, A* residual, bool backward) {
    const int64_t C = pr.chunk, K = pr.K, V = pr.V, NT = pr.num_chunks();
    const int64_t nk = pr.B * pr.H * NT, nv = pr.B * pr.HV * NT;  // key / value chunks
    Carver<A> c(ws);
    kq = c.take(nk * 2 * C * K);
    kqk = c.take(nk * 2 * C * C);
    v = c.take(nv * C * V);
    G = c.take(nv * C);
    gamma = c.take(nv * C);
    e = c.take(nv * C);
    beta = c.take(nv * C);
    if (pr.residual == Residual::full) {
      a = residual ? residual + states_elems(pr) : nullptr;
      wu = residual ? a + full_a_elems(pr) : nullptr;
    } else {
      a = c.take(nv * C * C);
      wu = c.take(nv * C * (K + V));
    }
    p = c.take(nv * C * C);
    x = c.take(nv * C * (K + V));
    qg = c.take(nv * C * K);
    ke = c.take(nv * C * K);
    vn = c.take(nv * C * V);
    if (backward) {
      d_o = c.take(nv * C * V);
      gam = c.take(nv * C * C);
      dqk = c.take(nv * 2 * C * K);  // [dQ; dK] of one value head
      dSloc = c.take(nv * K * V);
      dSend = c.take(nv * K * V);
      dwu = c.take(nv * C * (K + V));
      dpb = c.take(nv * 2 * C * C);  // [dP (then dPG); Bsym]
      da = c.take(nv * C * C);
      t1 = c.take(nv * C * C);
      xg = c.take(nv * C * C);
      dG = c.take(nv * C);
      s = c.take(nv * C);
    }
    used = c.used();
  }
};

// One operand of a batched GEMM: the tile of chunk c of slice s is at
// base + (slice * NT + c) * stride, slice = s or, for `key` operands, the key slice of s.
template <typename A>
struct Op {
  const A* base;
  int64_t ld, stride;
  bool key = false;
};

// C_(s,c) = alpha op(A_(s,c)) op(B_(s,c)) + beta C_(s,c) for every value slice s and chunk c.
template <typename A>
void batched(const Problem& p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, A alpha, Op<A> a,
             Op<A> b, A beta, A* c, int64_t ldc, int64_t stride_c) {
  const int64_t NT = p.num_chunks();
  if (p.group() == 1 || !(a.key || b.key)) {  // one uniform batch over all slices and chunks
    gemm_strided_batched(ta, tb, M, N, K, alpha, a.base, a.ld, a.stride, b.base, b.ld, b.stride,
                         beta, c, ldc, stride_c, p.B * p.HV * NT);
    return;
  }
  for (int64_t s = 0; s < p.B * p.HV; ++s) {
    const int64_t ks = (s / p.HV) * p.H + (s % p.HV) / p.group();
    gemm_strided_batched(ta, tb, M, N, K, alpha, a.base + (a.key ? ks : s) * NT * a.stride, a.ld,
                         a.stride, b.base + (b.key ? ks : s) * NT * b.stride, b.ld, b.stride, beta,
                         c + s * NT * stride_c, ldc, stride_c, NT);
  }
}

// Loads q, k (key slices), v, gates (value slices) of every chunk, padded; [KK; QK] = [k; q] k^T.
template <typename T, typename A>
void load_all(const Problem& p, const Inputs<T>& in, const Buffers<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, NT = p.num_chunks();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < p.B * p.H * NT; ++i) {
    const int64_t ks = i / NT, c = i % NT, b = ks / p.H, h = ks % p.H;
    const int64_t t0 = c * C, len = std::min(C, p.T - t0);
    A* kq = w.kq + i * 2 * C * K;
    load_rows(in.k + qk_offset(p, b, t0, h), p.H * K, len, K, C, A(1), kq, K);
    load_rows(in.q + qk_offset(p, b, t0, h), p.H * K, len, K, C, A(p.scale), kq + C * K, K);
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < p.B * p.HV * NT; ++i) {
    const int64_t s = i / NT, c = i % NT, b = s / p.HV, hv = s % p.HV;
    const int64_t t0 = c * C, len = std::min(C, p.T - t0), go = gate_offset(p, b, t0, hv);
    load_rows(in.v + vo_offset(p, b, t0, hv), p.HV * V, len, V, C, A(1), w.v + i * C * V, V);
    load_gates(in.g + go, in.beta + go, p.HV, len, C, w.G + i * C, w.gamma + i * C, w.e + i * C,
               w.beta + i * C);
  }
  gemm_strided_batched(false, true, 2 * C, C, K, A(1), w.kq, K, 2 * C * K, w.kq, K, 2 * C * K, A(0),
                       w.kqk, C, 2 * C * C, p.B * p.H * NT);
}

// Per chunk: M -> A = (I + M)^-1 (unless `have_a`), P = QK o Gam, X = [beta gamma K | beta V],
// gamma Q, e K, and (when gam is given) Gam itself. Then [W | U] = A X unless `have_a`.
template <typename A>
void prepare_chunks(const Problem& p, const Buffers<A>& w, bool have_a, A* gam) {
  const int64_t C = p.chunk, K = p.K, V = p.V, NT = p.num_chunks(), KpV = K + V;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < p.B * p.HV * NT; ++i) {
    const int64_t s = i / NT, c = i % NT;
    const int64_t ki = ((s / p.HV) * p.H + (s % p.HV) / p.group()) * NT + c;  // key chunk
    const A* k = w.kq + ki * 2 * C * K;
    const A* qs = k + C * K;
    const A* KK = w.kqk + ki * 2 * C * C;
    const A* QK = KK + C * C;
    const A *G = w.G + i * C, *gamma = w.gamma + i * C, *e = w.e + i * C, *beta = w.beta + i * C;
    A* a = w.a + i * C * C;
    A* P = w.p + i * C * C;
    A gam_local[64 * 64];
    A* g_ij = gam ? gam + i * C * C : gam_local;
    decay_matrix(G, C, g_ij);  // Gam, exponents <= 0
    for (int64_t r = 0; r < C; ++r) {
      const A* gr = g_ij + r * C;
      if (!have_a) {
        for (int64_t l = 0; l < r; ++l) a[r * C + l] = beta[r] * KK[r * C + l] * gr[l];
        for (int64_t l = r; l < C; ++l) a[r * C + l] = 0;
      }
      for (int64_t l = 0; l < C; ++l) P[r * C + l] = QK[r * C + l] * gr[l];
    }
    if (!have_a) {
      A row_tmp[64];
      invert_unit_lower(a, C, row_tmp);
    }
    A* x = w.x + i * C * KpV;
    const A* v = w.v + i * C * V;
    for (int64_t r = 0; r < C; ++r) {
      for (int64_t l = 0; l < K; ++l) {
        x[r * KpV + l] = beta[r] * gamma[r] * k[r * K + l];
        w.qg[(i * C + r) * K + l] = gamma[r] * qs[r * K + l];
        w.ke[(i * C + r) * K + l] = e[r] * k[r * K + l];
      }
      for (int64_t l = 0; l < V; ++l) x[r * KpV + K + l] = beta[r] * v[r * V + l];
    }
  }
  if (!have_a)
    gemm_strided_batched(false, false, C, KpV, C, A(1), w.a, C, C * C, w.x, KpV, C * KpV, A(0),
                         w.wu, KpV, C * KpV, p.B * p.HV * NT);
}

}  // namespace

int64_t chunked_forward_workspace(const Problem& p) {
  return Buffers<float>(p, nullptr, nullptr, false).used;
}
int64_t chunked_backward_workspace(const Problem& p) {
  return Buffers<float>(p, nullptr, nullptr, true).used;
}

template <typename T>
void chunked_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out) {
  using A = acc_t<T>;
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, NT = p.num_chunks(), KpV = K + V;
  const Buffers<A> w(p, out.workspace, out.residual, false);
  A* states = out.residual;
  load_all(p, in, w);
  prepare_chunks(p, w, false, static_cast<A*>(nullptr));
  // The recurrence over chunks: Vn = U - W S;  S' = gamma_C S + (e K)^T Vn.
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < p.B * p.HV; ++s) {
    A* S = states + s * NT * KV;
    if (p.has_h0) {
      std::memcpy(S, in.h0 + s * KV, KV * sizeof(A));
    } else {
      std::memset(S, 0, KV * sizeof(A));
    }
    for (int64_t c = 0; c < NT; ++c) {
      const int64_t i = s * NT + c;
      A* vn = w.vn + i * C * V;
      const A* wu = w.wu + i * C * KpV;
      for (int64_t r = 0; r < C; ++r) std::memcpy(vn + r * V, wu + r * KpV + K, V * sizeof(A));
      gemm(false, false, C, V, K, A(-1), wu, KpV, S, V, A(1), vn, V);
      A* S_next = c + 1 < NT ? S + KV : (p.want_ht ? out.ht + s * KV : nullptr);
      if (!S_next) break;
      const A gamma_c = w.gamma[i * C + C - 1];
      for (int64_t l = 0; l < KV; ++l) S_next[l] = gamma_c * S[l];
      gemm(true, false, K, V, C, A(1), w.ke + i * C * K, K, vn, V, A(1), S_next, V);
      S = S_next;
    }
  }
  // O = (gamma Q) S + P Vn, into the v buffer (v is no longer needed).
  A* o = w.v;
  batched<A>(p, false, false, C, V, K, A(1), {w.qg, K, C * K}, {states, V, KV}, A(0), o, V, C * V);
  batched<A>(p, false, false, C, V, C, A(1), {w.p, C, C * C}, {w.vn, V, C * V}, A(1), o, V, C * V);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < p.B * p.HV * NT; ++i) {
    const int64_t s = i / NT, c = i % NT, b = s / p.HV, hv = s % p.HV, t0 = c * C;
    store_rows(o + i * C * V, V, std::min(C, p.T - t0), V, A(1), out.o + vo_offset(p, b, t0, hv),
               p.HV * V);
  }
}

template <typename T>
void chunked_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) {
  using A = acc_t<T>;
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, NT = p.num_chunks(), KpV = K + V;
  const int64_t nv = p.B * p.HV * NT;
  const Buffers<A> w(p, args.workspace, const_cast<A*>(args.residual), true);
  const A* states = args.residual;
  load_all(p, in, w);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nv; ++i) {
    const int64_t s = i / NT, c = i % NT, b = s / p.HV, hv = s % p.HV, t0 = c * C;
    load_rows(args.d_o + vo_offset(p, b, t0, hv), p.HV * V, std::min(C, p.T - t0), V, C, A(1),
              w.d_o + i * C * V, V);
  }
  prepare_chunks(p, w, p.residual == Residual::full, w.gam);
  // Vn = U - W S
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nv; ++i)
    for (int64_t r = 0; r < C; ++r)
      std::memcpy(w.vn + (i * C + r) * V, w.wu + (i * C + r) * KpV + K, V * sizeof(A));
  batched<A>(p, false, false, C, V, K, A(-1), {w.wu, KpV, C * KpV}, {states, V, KV}, A(1), w.vn, V,
             C * V);
  // dVn = P^T dO (+ diag(e) K dS' below), into the right columns of dWU;  dSloc = (gamma Q)^T dO
  A* dvn = w.dwu + K;
  batched<A>(p, true, false, C, V, C, A(1), {w.p, C, C * C}, {w.d_o, V, C * V}, A(0), dvn, KpV,
             C * KpV);
  batched<A>(p, true, false, K, V, C, A(1), {w.qg, K, C * K}, {w.d_o, V, C * V}, A(0), w.dSloc, V,
             KV);
  // The recurrence in reverse: dVn += diag(e) K dS';  dS = gamma_C dS' + dSloc - W^T dVn.
  // dSend[c] keeps dS' of chunk c; dSloc[c] becomes dS of chunk c (= dS' of chunk c - 1).
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < p.B * p.HV; ++s) {
    for (int64_t c = NT - 1; c >= 0; --c) {
      const int64_t i = s * NT + c;
      A* dSp = w.dSend + i * KV;
      if (c + 1 < NT) {
        std::memcpy(dSp, w.dSloc + (i + 1) * KV, KV * sizeof(A));
      } else if (args.dht) {
        std::memcpy(dSp, args.dht + s * KV, KV * sizeof(A));
      } else {
        std::memset(dSp, 0, KV * sizeof(A));
      }
      gemm(false, false, C, V, K, A(1), w.ke + i * C * K, K, dSp, V, A(1), dvn + i * C * KpV, KpV);
      A* dS = w.dSloc + i * KV;
      gemm(true, false, K, V, C, A(-1), w.wu + i * C * KpV, KpV, dvn + i * C * KpV, KpV, A(1), dS,
           V);
      const A gamma_c = w.gamma[i * C + C - 1];
      for (int64_t l = 0; l < KV; ++l) dS[l] += gamma_c * dSp[l];
    }
    if (p.has_h0) std::memcpy(args.dh0 + s * KV, w.dSloc + s * NT * KV, KV * sizeof(A));
  }
  // Chunk-local products, batched over the whole length.
  A* dkv = w.dqk + C * K;
  batched<A>(p, false, true, C, C, V, A(1), {w.d_o, V, C * V}, {w.vn, V, C * V}, A(0), w.dpb, C,
             2 * C * C);  // dP = dO Vn^T
  batched<A>(p, false, true, C, K, V, A(1), {w.d_o, V, C * V}, {states, V, KV}, A(0), w.dqk, K,
             2 * C * K);  // DS = dO S^T, into the dQ rows
  batched<A>(p, false, true, C, K, V, A(1), {w.vn, V, C * V}, {w.dSend, V, KV}, A(0), dkv, K,
             2 * C * K);  // Vn dS'^T, into the dK rows
  batched<A>(p, false, true, C, K, V, A(-1), {dvn, KpV, C * KpV}, {states, V, KV}, A(0), w.dwu, KpV,
             C * KpV);  // dW = -dVn S^T
  batched<A>(p, false, true, C, C, KpV, A(1), {w.dwu, KpV, C * KpV}, {w.x, KpV, C * KpV}, A(0),
             w.da, C, C * C);  // dA = [dW | dU] X^T
  batched<A>(p, true, false, C, KpV, C, A(1), {w.a, C, C * C}, {w.dwu, KpV, C * KpV}, A(0), w.x,
             KpV, C * KpV);  // [dXw | dXu] = A^T [dW | dU], over X
  batched<A>(p, false, true, C, C, C, A(1), {w.da, C, C * C}, {w.a, C, C * C}, A(0), w.t1, C,
             C * C);  // T1 = dA A^T
  batched<A>(p, true, false, C, C, C, A(-1), {w.a, C, C * C}, {w.t1, C, C * C}, A(0), w.da, C,
             C * C);  // dM = -A^T T1 (strict lower used)
  // Element-wise: dG, dbeta, dv; dPG = dP o Gam; Bsym = B + B^T, B = diag(beta)(dM o Gam).
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nv; ++i) {
    const int64_t s = i / NT, c = i % NT, b = s / p.HV, hv = s % p.HV, t0 = c * C;
    const int64_t len = std::min(C, p.T - t0), go = gate_offset(p, b, t0, hv);
    const int64_t ki = ((s / p.HV) * p.H + (s % p.HV) / p.group()) * NT + c;
    const A* k = w.kq + ki * 2 * C * K;
    const A* KK = w.kqk + ki * 2 * C * C;
    const A *gamma = w.gamma + i * C, *e = w.e + i * C, *beta = w.beta + i * C;
    const A *gam = w.gam + i * C * C, *P = w.p + i * C * C, *dM = w.da + i * C * C;
    const A* v = w.v + i * C * V;
    A *dG = w.dG + i * C, *sv = w.s + i * C, *DS = w.dqk + i * 2 * C * K, *dkv = DS + C * K;
    A *dP = w.dpb + i * 2 * C * C, *bsym = dP + C * C, *dx = w.x + i * C * KpV;
    A* X = w.xg + i * C * C;
    // dG = a + rowsum(X) - colsum(X) (+ c at the end), X strictly lower: see store_gate_grad.
    for (int64_t r = 0; r < C; ++r) {
      // s_r = e_r k_r . (dS' vn_r);  dK = diag(e) Vn dS'^T;  a = (gamma q) . DS;  dQ = gamma DS
      sv[r] = e[r] * dot(dkv + r * K, k + r * K, K);
      dG[r] = dot(w.qg + (i * C + r) * K, DS + r * K, K);
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
      if (r < len)
        store_rows(dxw + K, KpV, 1, V, beta[r], args.dv + vo_offset(p, b, t0 + r, hv), V);
      bsym[r * C + r] = 0;
      for (int64_t l = 0; l < C; ++l) {
        // X = dP o P (strictly lower; the diagonal cancels);  dPG = dP o Gam
        if (l < r) X[r * C + l] = dP[r * C + l] * P[r * C + l];
        dP[r * C + l] *= gam[r * C + l];
      }
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
    // dG -= s, and at the chunk end + sum(s) + gamma_C <S, dS'>: s joins X's last row.
    for (int64_t l = 0; l + 1 < C; ++l) X[(C - 1) * C + l] += sv[l];
    A col[64];
    store_gate_grad(dG, X, gamma[C - 1] * dot(states + i * KV, w.dSend + i * KV, KV), len, C, col,
                    args.dg + go, p.HV);
    for (int64_t r = 0; r < len; ++r) args.dbeta[go + r * p.HV] = from_acc<T>(dbeta[r]);
  }
  // [dQ; dK] += [dPG; Bsym] K;  dK += dPG^T Q  (per value head; k, q from the key slice)
  batched<A>(p, false, false, 2 * C, K, C, A(1), {w.dpb, C, 2 * C * C}, {w.kq, K, 2 * C * K, true},
             A(1), w.dqk, K, 2 * C * K);
  batched<A>(p, true, false, C, K, C, A(1), {w.dpb, C, 2 * C * C},
             {w.kq + C * K, K, 2 * C * K, true}, A(1), dkv, K, 2 * C * K);
  // Sum over the value heads of each group, in order: dq = scale sum_j dQ_j, dk = sum_j dK_j.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < p.B * p.H * NT; ++i) {
    const int64_t ks = i / NT, c = i % NT, b = ks / p.H, h = ks % p.H, t0 = c * C;
    const int64_t len = std::min(C, p.T - t0);
    const int64_t first = (b * p.HV + h * p.group()) * NT + c;  // value chunk of j = 0
    A sum_q[256], sum_k[256];                                   // one row at a time (K <= 256)
    for (int64_t r = 0; r < len; ++r) {
      for (int64_t l = 0; l < K; ++l) sum_q[l] = sum_k[l] = 0;
      for (int64_t j = 0; j < p.group(); ++j) {
        const A* dq_row = w.dqk + ((first + j * NT) * 2 * C + r) * K;
        const A* dk_row = dq_row + C * K;
        for (int64_t l = 0; l < K; ++l) {
          sum_q[l] += dq_row[l];
          sum_k[l] += dk_row[l];
        }
      }
      store_rows(sum_q, K, 1, K, A(p.scale), args.dq + qk_offset(p, b, t0 + r, h), K);
      store_rows(sum_k, K, 1, K, A(1), args.dk + qk_offset(p, b, t0 + r, h), K);
    }
  }
}

GDN_GDR_INSTANTIATE(chunked)

}  // namespace gdn::gdr::detail
