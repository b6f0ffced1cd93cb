// The chunked (WY / UT) gated delta rule on the CPU: every chunk-level intermediate (A, W, U, Vn,
// P, Gam and their gradients) is materialised over the full length in the workspace, and the work
// runs as a few passes over all (slice, chunk) pairs, parallel over chunks as well as slices,
// around the two inter-chunk recurrences (Vn, S' forward; dVn, dS backward) that run chunk after
// chunk per slice. Each pass is chunk-major (all GEMMs of one chunk back to back, then its
// element-wise work), so a chunk's tiles stay in cache between products.
//
// Residual `minimal`: the chunk-start states; the backward recomputes A, W, U, Vn, P.
// Residual `full`: the states, then A and [W | U] of every chunk, which the backward reuses.
// With GVA the per-value-head dq, dk go to the workspace and are summed over the group in a
// fixed order at the end (deterministic). Math and notation: docs/design.md, "The gated delta
// rule".
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gdr_internal.h"

namespace gdn::gdr::detail {

namespace {

using cpu::gemm;

// Every buffer is [slice][NT][chunk tile]: value slices (b, hv) unless noted as key slices (b, h).
template <typename A>
struct Buffers {
  // forward and recompute
  A *kq, *kqk;                       // key slices: [k; scale q] (2C x K), [KK; QK] (2C x C)
  A *v, *G, *gamma, *e, *beta;       // C x V, C each
  A *a, *p, *x, *wu, *qg, *ke, *vn;  // A, P (C x C), [Xw | Xu], [W | U], gamma Q, e K, Vn
  // backward only
  A *d_o, *gam, *dqk, *dSloc, *dSend, *dwu, *dpb, *da;
  int64_t ld_vn = 0;  // Vn overwrites U in [W | U] (minimal) or has its own buffer (full)
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
    if (pr.residual == Residual::full) {
      vn = c.take(nv * C * V);
      ld_vn = V;
    } else {
      vn = wu ? wu + K : nullptr;
      ld_vn = K + V;
    }
    if (backward) {
      d_o = c.take(nv * C * V);
      gam = c.take(nv * C * C);
      dqk = c.take(nv * 2 * C * K);  // [dQ; dK] of one value head
      dSloc = c.take(nv * K * V);
      dSend = c.take(nv * K * V);
      dwu = c.take(nv * C * (K + V));
      dpb = c.take(nv * 2 * C * C);  // [dP (then dPG); Bsym]
      da = c.take(nv * C * C);
    }
    used = c.used();
  }
};

// The tiles of value chunk i = (slice s, chunk c) and of its key chunk.
template <typename A>
struct Tiles {
  int64_t i, s, c, b, hv, t0, len, go;
  const A *k, *qs, *KK, *QK;
  A *v, *G, *gamma, *e, *beta, *a, *P, *x, *wu, *qg, *ke, *vn;
  Tiles(const Problem& p, const Buffers<A>& w, int64_t index) : i(index) {
    const int64_t C = p.chunk, K = p.K, V = p.V, NT = p.num_chunks();
    s = i / NT;
    c = i % NT;
    b = s / p.HV;
    hv = s % p.HV;
    t0 = c * C;
    len = std::min(C, p.T - t0);
    go = gate_offset(p, b, t0, hv);
    const int64_t ki = (b * p.H + hv / p.group()) * NT + c;
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
void load_keys(const Problem& p, const Inputs<T>& in, const Buffers<A>& w) {
  const int64_t C = p.chunk, K = p.K, NT = p.num_chunks();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < p.B * p.H * NT; ++i) {
    const int64_t ks = i / NT, c = i % NT, b = ks / p.H, h = ks % p.H;
    const int64_t t0 = c * C, len = std::min(C, p.T - t0);
    A* kq = w.kq + i * 2 * C * K;
    load_rows(in.k + qk_offset(p, b, t0, h), p.H * K, len, K, C, A(1), kq, K);
    load_rows(in.q + qk_offset(p, b, t0, h), p.H * K, len, K, C, A(p.scale), kq + C * K, K);
    gemm(false, true, 2 * C, C, K, A(1), kq, K, kq, K, A(0), w.kqk + i * 2 * C * C, C);
  }
}

// One value chunk: loads v, the gates (and dO when d_o is given), padded; Gam (kept when gam is
// given); unless `have_a`: M -> A = (I + M)^-1 and [W | U] = A X; always P = QK o Gam,
// X = [beta gamma K | beta V], gamma Q, e K.
template <typename T, typename A>
void prepare_chunk(const Problem& p, const Inputs<T>& in, const T* d_o, const Buffers<A>& w,
                   const Tiles<A>& t, bool have_a, A* gam) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KpV = K + V;
  const int64_t vo = vo_offset(p, t.b, t.t0, t.hv);
  load_rows(in.v + vo, p.HV * V, t.len, V, C, A(1), t.v, V);
  if (d_o) load_rows(d_o + vo, p.HV * V, t.len, V, C, A(1), w.d_o + t.i * C * V, V);
  load_gates(in.g + t.go, in.beta + t.go, p.HV, t.len, C, t.G, t.gamma, t.e, t.beta);
  A gam_local[64 * 64];
  A* g_ij = gam ? gam : gam_local;
  decay_matrix(t.G, C, g_ij);  // Gam, exponents <= 0
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
  const int64_t nv = p.B * p.HV * NT;
  const Buffers<A> w(p, out.workspace, out.residual, false);
  A* states = out.residual;
  load_keys(p, in, w);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nv; ++i)
    prepare_chunk(p, in, static_cast<const T*>(nullptr), w, Tiles<A>(p, w, i), false,
                  static_cast<A*>(nullptr));
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
      const Tiles<A> t(p, w, s * NT + c);
      if (t.vn != t.wu + K)
        for (int64_t r = 0; r < C; ++r)
          std::memcpy(t.vn + r * V, t.wu + r * KpV + K, V * sizeof(A));
      gemm(false, false, C, V, K, A(-1), t.wu, KpV, S, V, A(1), t.vn, w.ld_vn);
      A* S_next = c + 1 < NT ? S + KV : (p.want_ht ? out.ht + s * KV : nullptr);
      if (!S_next) break;
      const A gamma_c = t.gamma[C - 1];
      for (int64_t l = 0; l < KV; ++l) S_next[l] = gamma_c * S[l];
      gemm(true, false, K, V, C, A(1), t.ke, K, t.vn, w.ld_vn, A(1), S_next, V);
      S = S_next;
    }
  }
  // O = (gamma Q) S + P Vn, into the v tile (v is no longer needed).
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nv; ++i) {
    const Tiles<A> t(p, w, i);
    A* o = t.v;
    gemm(false, false, C, V, K, A(1), t.qg, K, states + i * KV, V, A(0), o, V);
    gemm(false, false, C, V, C, A(1), t.P, C, t.vn, w.ld_vn, A(1), o, V);
    store_rows(o, V, t.len, V, A(1), out.o + vo_offset(p, t.b, t.t0, t.hv), p.HV * V);
  }
}

template <typename T>
void chunked_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) {
  using A = acc_t<T>;
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, NT = p.num_chunks(), KpV = K + V;
  const int64_t nv = p.B * p.HV * NT, ld_vn = Buffers<A>(p, nullptr, nullptr, true).ld_vn;
  const Buffers<A> w(p, args.workspace, const_cast<A*>(args.residual), true);
  const A* states = args.residual;
  const bool have_a = p.residual == Residual::full;
  load_keys(p, in, w);
  // Recompute per chunk (A, [W | U] come from the residual under `full`), Vn = U - W S;
  // dVn = P^T dO (+ diag(e) K dS' below), in the right columns of dWU;  dSloc = (gamma Q)^T dO.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nv; ++i) {
    const Tiles<A> t(p, w, i);
    prepare_chunk(p, in, args.d_o, w, t, have_a, w.gam + i * C * C);
    if (have_a)  // U stays in the residual: Vn gets its own buffer
      for (int64_t r = 0; r < C; ++r) std::memcpy(t.vn + r * V, t.wu + r * KpV + K, V * sizeof(A));
    gemm(false, false, C, V, K, A(-1), t.wu, KpV, states + i * KV, V, A(1), t.vn, ld_vn);
    const A* d_o = w.d_o + i * C * V;
    gemm(true, false, C, V, C, A(1), t.P, C, d_o, V, A(0), w.dwu + i * C * KpV + K, KpV);
    gemm(true, false, K, V, C, A(1), t.qg, K, d_o, V, A(0), w.dSloc + i * KV, V);
  }
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
      A* dvn = w.dwu + i * C * KpV + K;
      gemm(false, false, C, V, K, A(1), w.ke + i * C * K, K, dSp, V, A(1), dvn, KpV);
      A* dS = w.dSloc + i * KV;
      gemm(true, false, K, V, C, A(-1), w.wu + i * C * KpV, KpV, dvn, KpV, A(1), dS, V);
      const A gamma_c = w.gamma[i * C + C - 1];
      for (int64_t l = 0; l < KV; ++l) dS[l] += gamma_c * dSp[l];
    }
    if (p.has_h0) std::memcpy(args.dh0 + s * KV, w.dSloc + s * NT * KV, KV * sizeof(A));
  }
  // Everything else is chunk-local.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nv; ++i) {
    const Tiles<A> t(p, w, i);
    const int64_t b = t.b, hv = t.hv, t0 = t.t0, len = t.len, go = t.go;
    const A *k = t.k, *KK = t.KK, *gamma = t.gamma, *e = t.e, *beta = t.beta, *P = t.P, *v = t.v;
    const A *S = states + i * KV, *dSp = w.dSend + i * KV, *d_o = w.d_o + i * C * V;
    const A* gam = w.gam + i * C * C;
    A *DS = w.dqk + i * 2 * C * K, *dkv = DS + C * K;   // [dQ; dK] of this value head
    A *dP = w.dpb + i * 2 * C * C, *bsym = dP + C * C;  // [dP (then dPG); Bsym]
    A *dwu = w.dwu + i * C * KpV, *dvn = dwu + K, *dM = w.da + i * C * C, *dx = t.x;
    gemm(false, true, C, C, V, A(1), d_o, V, t.vn, ld_vn, A(0), dP, C);   // dP = dO Vn^T
    gemm(false, true, C, K, V, A(1), d_o, V, S, V, A(0), DS, K);          // DS = dO S^T
    gemm(false, true, C, K, V, A(1), t.vn, ld_vn, dSp, V, A(0), dkv, K);  // Vn dS'^T
    gemm(false, true, C, K, V, A(-1), dvn, KpV, S, V, A(0), dwu, KpV);    // dW = -dVn S^T
    gemm(false, true, C, C, KpV, A(1), dwu, KpV, t.x, KpV, A(0), dM, C);  // dA = [dW|dU] X^T
    gemm(true, false, C, KpV, C, A(1), t.a, C, dwu, KpV, A(0), dx, KpV);  // dX = A^T [dW|dU]
    gemm(false, true, C, C, C, A(1), dM, C, t.a, C, A(0), bsym, C);       // T1 = dA A^T
    gemm(true, false, C, C, C, A(-1), t.a, C, bsym, C, A(0), dM, C);      // dM = -A^T T1
    // Element-wise: dG, dbeta, dv; dPG = dP o Gam; Bsym = B + B^T, B = diag(beta)(dM o Gam).
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
      if (r < len)
        store_rows(dxw + K, KpV, 1, V, beta[r], args.dv + vo_offset(p, b, t0 + r, hv), V);
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
    // dG -= s, and at the chunk end + sum(s) + gamma_C <S, dS'>: s joins X's last row.
    for (int64_t l = 0; l + 1 < C; ++l) X[(C - 1) * C + l] += sv[l];
    A col[64];
    store_gate_grad(dG, X, gamma[C - 1] * dot(S, dSp, KV), len, C, col, args.dg + go, p.HV);
    for (int64_t r = 0; r < len; ++r) args.dbeta[go + r * p.HV] = from_acc<T>(dbeta[r]);
    // [dQ; dK] += [dPG; Bsym] K;  dK += dPG^T Q  (k, q of the key head)
    gemm(false, false, 2 * C, K, C, A(1), dP, C, k, K, A(1), DS, K);
    gemm(true, false, C, K, C, A(1), dP, C, t.qs, K, A(1), dkv, K);
  }
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
