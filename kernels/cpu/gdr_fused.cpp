// The fused gated delta rule on the CPU: one pass over the chunks of each slice with every
// chunk-local matrix in small per-slice buffers (a few C x K tiles, cache resident), no
// full-length intermediates. GEMMs (single-threaded inside the parallel region) do the products.
//
// Forward: threads over (b, value head). Backward: threads over (b, key head) with the value
// heads of the group inside, chunk-major, so dq and dk of a chunk are summed over the group in a
// fixed order in an fp32/fp64 tile before they are stored. The chunk-start states come from the
// residual (`minimal` policy); everything else is recomputed per chunk. Math: docs/design.md, "The
// gated delta rule".
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gdr_internal.h"

namespace gdn::gdr::detail {

namespace {

using cpu::gemm;

// Buffers of one forward slice. kq = [k; scale q] (2C x K), kqk = [K K^T; Q K^T] (2C x C; the
// lower half becomes P), x = [Xw | Xu], wu = [W | U] whose U columns become Vn.
template <typename A>
struct ForwardScratch {
  A *kq, *kqk, *G, *gamma, *e, *beta, *a, *inv_tmp, *x, *wu, *qg, *o, *S;
  ForwardScratch(const Problem& p, A* base) {
    const int64_t C = p.chunk, K = p.K, V = p.V;
    Carver<A> c(base);
    kq = c.take(2 * C * K);
    kqk = c.take(2 * C * C);
    G = c.take(C);
    gamma = c.take(C);
    e = c.take(C);
    beta = c.take(C);
    a = c.take(C * C);
    inv_tmp = c.take(invert_tmp_elems(C));
    x = c.take(C * (K + V));
    wu = c.take(C * (K + V));
    qg = c.take(C * K);
    o = c.take(C * V);
    S = c.take(K * V);
    used = c.used();
  }
  int64_t used = 0;
};

// Buffers of one backward slice (b, key head): the shared chunk tiles, the per-value-head tiles
// (reused across the group) and the running dS' of every value head in the group.
template <typename A>
struct BackwardScratch {
  A *kq, *kqk, *dqk;  // shared by the group
  A *v, *d_o, *G, *gamma, *e, *beta, *dG, *dbeta, *s, *gam, *a, *inv_tmp, *p, *x, *wu, *qg, *ke,
      *DS, *dwu, *dpb, *da, *t1, *xg, *col, *tmp, *dS_new;  // one value head
  A* dS;                                                    // group x K x V
  BackwardScratch(const Problem& pr, A* base) {
    const int64_t C = pr.chunk, K = pr.K, V = pr.V;
    Carver<A> c(base);
    kq = c.take(2 * C * K);
    kqk = c.take(2 * C * C);
    dqk = c.take(2 * C * K);
    v = c.take(C * V);
    d_o = c.take(C * V);
    G = c.take(C);
    gamma = c.take(C);
    e = c.take(C);
    beta = c.take(C);
    dG = c.take(C);
    dbeta = c.take(C);
    s = c.take(C);
    gam = c.take(C * C);
    a = c.take(C * C);
    inv_tmp = c.take(invert_tmp_elems(C));
    p = c.take(C * C);
    x = c.take(C * (K + V));
    wu = c.take(C * (K + V));
    qg = c.take(C * K);
    ke = c.take(C * K);
    DS = c.take(C * K);
    dwu = c.take(C * (K + V));
    dpb = c.take(2 * C * C);
    da = c.take(C * C);
    t1 = c.take(C * C);
    xg = c.take(C * C);
    col = c.take(C);
    tmp = c.take(C * K);
    dS_new = c.take(K * V);
    dS = c.take(pr.group() * K * V);
    used = c.used();
  }
  int64_t used = 0;
};

// Loads [k; scale q] of chunk c for key head h and forms [K K^T; Q K^T].
template <typename T, typename A>
void load_keys(const Problem& p, const Inputs<T>& in, int64_t b, int64_t h, int64_t t0, int64_t len,
               A* kq, A* kqk) {
  const int64_t C = p.chunk, K = p.K;
  load_rows(in.k + qk_offset(p, b, t0, h), p.H * K, len, K, C, A(1), kq, K);
  load_rows(in.q + qk_offset(p, b, t0, h), p.H * K, len, K, C, A(p.scale), kq + C * K, K);
  gemm(false, true, 2 * C, C, K, A(1), kq, K, kq, K, A(0), kqk, C);
}

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

}  // namespace

int64_t fused_forward_workspace(const Problem& p) {
  return p.B * p.HV * ForwardScratch<float>(p, nullptr).used;
}
int64_t fused_backward_workspace(const Problem& p) {
  return p.B * p.H * BackwardScratch<float>(p, nullptr).used;
}

template <typename T>
void fused_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out) {
  using A = acc_t<T>;
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, NT = p.num_chunks(), KpV = K + V;
  const int64_t per_slice = ForwardScratch<A>(p, nullptr).used;
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < p.B * p.HV; ++s) {
    const int64_t b = s / p.HV, hv = s % p.HV, h = hv / p.group();
    ForwardScratch<A> w(p, out.workspace + s * per_slice);
    if (p.has_h0) {
      std::memcpy(w.S, in.h0 + s * KV, KV * sizeof(A));
    } else {
      std::memset(w.S, 0, KV * sizeof(A));
    }
    for (int64_t c = 0; c < NT; ++c) {
      const int64_t t0 = c * C, len = std::min(C, p.T - t0);
      std::memcpy(out.residual + (s * NT + c) * KV, w.S, KV * sizeof(A));
      load_keys(p, in, b, h, t0, len, w.kq, w.kqk);
      const A* k = w.kq;
      const A* qs = w.kq + C * K;
      A* P = w.kqk + C * C;
      load_gates(in.g + gate_offset(p, b, t0, hv), in.beta + gate_offset(p, b, t0, hv), p.HV, len,
                 C, w.G, w.gamma, w.e, w.beta);
      // M_ij = beta_i (k_i.k_j) Gam_ij (i > j);  P = (Q K^T) o Gam (i >= j)
      for (int64_t i = 0; i < C; ++i) {
        A* ai = w.a + i * C;
        A* pi = P + i * C;
        const A* kki = w.kqk + i * C;
        A* d = w.inv_tmp;  // Gam_ij, j < i
        decay_row(w.G, w.G[i], i, d);
        for (int64_t j = 0; j < i; ++j) {
          ai[j] = w.beta[i] * kki[j] * d[j];
          pi[j] *= d[j];
        }
        for (int64_t j = i; j < C; ++j) ai[j] = 0;
        for (int64_t j = i + 1; j < C; ++j) pi[j] = 0;
      }
      invert_unit_lower(w.a, C, w.inv_tmp);  // A = (I + M)^-1
      // X = [beta gamma K | beta V];  [W | U] = A X;  Vn = U - W S (in the U columns)
      load_rows(in.v + vo_offset(p, b, t0, hv), p.HV * V, len, V, C, A(1), w.o, V);
      form_x(C, K, V, k, w.o, V, w.beta, w.gamma, w.x);
      gemm(false, false, C, KpV, C, A(1), w.a, C, w.x, KpV, A(0), w.wu, KpV);
      A* vn = w.wu + K;
      gemm(false, false, C, V, K, A(-1), w.wu, KpV, w.S, V, A(1), vn, KpV);
      // O = (gamma Q) S + P Vn
      for (int64_t i = 0; i < C; ++i)
        for (int64_t l = 0; l < K; ++l) w.qg[i * K + l] = w.gamma[i] * qs[i * K + l];
      gemm(false, false, C, V, K, A(1), w.qg, K, w.S, V, A(0), w.o, V);
      gemm(false, false, C, V, C, A(1), P, C, vn, KpV, A(1), w.o, V);
      store_rows(w.o, V, len, V, A(1), out.o + vo_offset(p, b, t0, hv), p.HV * V);
      // S' = gamma_C S + (e K)^T Vn
      const A gamma_c = w.gamma[C - 1];
      for (int64_t l = 0; l < KV; ++l) w.S[l] *= gamma_c;
      for (int64_t i = 0; i < C; ++i)
        for (int64_t l = 0; l < K; ++l) w.qg[i * K + l] = w.e[i] * k[i * K + l];
      gemm(true, false, K, V, C, A(1), w.qg, K, vn, KpV, A(1), w.S, V);
    }
    if (p.want_ht) std::memcpy(out.ht + s * KV, w.S, KV * sizeof(A));
  }
}

template <typename T>
void fused_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) {
  using A = acc_t<T>;
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, NT = p.num_chunks(), KpV = K + V;
  const int64_t per_slice = BackwardScratch<A>(p, nullptr).used;
#pragma omp parallel for schedule(static)
  for (int64_t kh = 0; kh < p.B * p.H; ++kh) {
    const int64_t b = kh / p.H, h = kh % p.H;
    BackwardScratch<A> w(p, args.workspace + kh * per_slice);
    for (int64_t j = 0; j < p.group(); ++j) {
      const int64_t s = b * p.HV + h * p.group() + j;
      if (args.dht) {
        std::memcpy(w.dS + j * KV, args.dht + s * KV, KV * sizeof(A));
      } else {
        std::memset(w.dS + j * KV, 0, KV * sizeof(A));
      }
    }
    for (int64_t c = NT - 1; c >= 0; --c) {
      const int64_t t0 = c * C, len = std::min(C, p.T - t0);
      load_keys(p, in, b, h, t0, len, w.kq, w.kqk);
      const A* k = w.kq;
      const A* qs = w.kq + C * K;
      const A* KK = w.kqk;
      const A* QK = w.kqk + C * C;
      A* dq = w.dqk;          // gradient of scale q, summed over the group
      A* dk = w.dqk + C * K;  // summed over the group
      std::memset(w.dqk, 0, 2 * C * K * sizeof(A));
      for (int64_t j = 0; j < p.group(); ++j) {
        const int64_t hv = h * p.group() + j, s = b * p.HV + hv;
        const A* S = args.residual + (s * NT + c) * KV;
        A* dSp = w.dS + j * KV;  // dS' (gradient of the chunk-end state)
        const int64_t go = gate_offset(p, b, t0, hv);
        load_rows(in.v + vo_offset(p, b, t0, hv), p.HV * V, len, V, C, A(1), w.v, V);
        load_rows(args.d_o + vo_offset(p, b, t0, hv), p.HV * V, len, V, C, A(1), w.d_o, V);
        load_gates(in.g + go, in.beta + go, p.HV, len, C, w.G, w.gamma, w.e, w.beta);
        decay_matrix(w.G, C, w.gam);
        // Recompute: M (strict lower) -> A = (I + M)^-1, P = (Q K^T) o Gam, [W | U], Vn.
        for (int64_t i = 0; i < C; ++i) {
          const A* gi = w.gam + i * C;
          for (int64_t l = 0; l < i; ++l) w.a[i * C + l] = w.beta[i] * KK[i * C + l] * gi[l];
          for (int64_t l = i; l < C; ++l) w.a[i * C + l] = 0;
          for (int64_t l = 0; l < C; ++l) w.p[i * C + l] = QK[i * C + l] * gi[l];
        }
        invert_unit_lower(w.a, C, w.inv_tmp);
        form_x(C, K, V, k, w.v, V, w.beta, w.gamma, w.x);
        gemm(false, false, C, KpV, C, A(1), w.a, C, w.x, KpV, A(0), w.wu, KpV);
        A* vn = w.wu + K;
        gemm(false, false, C, V, K, A(-1), w.wu, KpV, S, V, A(1), vn, KpV);
        for (int64_t i = 0; i < C; ++i)
          for (int64_t l = 0; l < K; ++l) {
            w.qg[i * K + l] = w.gamma[i] * qs[i * K + l];
            w.ke[i * K + l] = w.e[i] * k[i * K + l];
          }
        // dG = a + rowsum(X) - colsum(X) (+ c at the end), X strictly lower: see store_gate_grad.
        // DS = dO S^T: dQ += diag(gamma) DS;  a_i = (gamma_i q_i) . DS_i = gamma o rowsum(dO o QS)
        gemm(false, true, C, K, V, A(1), w.d_o, V, S, V, A(0), w.DS, K);
        for (int64_t i = 0; i < C; ++i) {
          w.dG[i] = dot(w.qg + i * K, w.DS + i * K, K);
          for (int64_t l = 0; l < K; ++l) dq[i * K + l] += w.gamma[i] * w.DS[i * K + l];
        }
        // dVn = diag(e) K dS' + P^T dO;  s_i = e_i k_i . (dS' vn_i) = (diag(e) K dS')_i . vn_i
        A* dvn = w.dwu + K;
        gemm(false, false, C, V, K, A(1), w.ke, K, dSp, V, A(0), dvn, KpV);
        for (int64_t i = 0; i < C; ++i) w.s[i] = dot(dvn + i * KpV, vn + i * KpV, V);
        gemm(true, false, C, V, C, A(1), w.p, C, w.d_o, V, A(1), dvn, KpV);
        // dS = gamma_C dS' + (diag(gamma) Q)^T dO - W^T dVn
        const A gamma_c = w.gamma[C - 1];
        gemm(true, false, K, V, C, A(1), w.qg, K, w.d_o, V, A(0), w.dS_new, V);
        gemm(true, false, K, V, C, A(-1), w.wu, KpV, dvn, KpV, A(1), w.dS_new, V);
        A state_dot = 0;  // <S, dS'>
        for (int64_t l = 0; l < KV; ++l) {
          state_dot += S[l] * dSp[l];
          w.dS_new[l] += gamma_c * dSp[l];
        }
        // dK += diag(e) Vn dS'^T
        gemm(false, true, C, K, V, A(1), vn, KpV, dSp, V, A(0), w.tmp, K);
        for (int64_t i = 0; i < C; ++i)
          for (int64_t l = 0; l < K; ++l) dk[i * K + l] += w.e[i] * w.tmp[i * K + l];
        // dP = dO Vn^T;  X = dP o P (strictly lower; the diagonal cancels);  dPG = dP o Gam
        A* dpg = w.dpb;
        gemm(false, true, C, C, V, A(1), w.d_o, V, vn, KpV, A(0), dpg, C);
        for (int64_t i = 0; i < C; ++i) {
          for (int64_t l = 0; l < i; ++l) w.xg[i * C + l] = dpg[i * C + l] * w.p[i * C + l];
          for (int64_t l = 0; l < C; ++l) dpg[i * C + l] *= w.gam[i * C + l];
        }
        // dK += dPG^T Q  (dQ += dPG K comes with the symmetric dM term below)
        gemm(true, false, C, K, C, A(1), dpg, C, qs, K, A(1), dk, K);
        // dW = -dVn S^T (dU = dVn);  dA = [dW | dU] X^T;  [dXw | dXu] = A^T [dW | dU]
        gemm(false, true, C, K, V, A(-1), dvn, KpV, S, V, A(0), w.dwu, KpV);
        gemm(false, true, C, C, KpV, A(1), w.dwu, KpV, w.x, KpV, A(0), w.da, C);
        A* dx = w.x;  // X is no longer needed
        gemm(true, false, C, KpV, C, A(1), w.a, C, w.dwu, KpV, A(0), dx, KpV);
        // dK += beta gamma dXw;  dV = beta dXu;  dbeta = gamma dXw.k + dXu.v;
        // a += beta gamma dXw.k
        A* dbeta = w.dbeta;
        for (int64_t i = 0; i < C; ++i) {
          const A* dxw = dx + i * KpV;
          const A* dxu = dxw + K;
          const A bg = w.beta[i] * w.gamma[i];
          const A xk = dot(dxw, k + i * K, K);
          for (int64_t l = 0; l < K; ++l) dk[i * K + l] += bg * dxw[l];
          dbeta[i] = w.gamma[i] * xk + dot(dxu, w.v + i * V, V);
          w.dG[i] += bg * xk;
        }
        for (int64_t i = 0; i < len; ++i)
          store_rows(dx + i * KpV + K, KpV, 1, V, w.beta[i], args.dv + vo_offset(p, b, t0 + i, hv),
                     V);
        // dM = strictly_lower(-A^T dA A^T)
        gemm(false, true, C, C, C, A(1), w.da, C, w.a, C, A(0), w.t1, C);
        gemm(true, false, C, C, C, A(-1), w.a, C, w.t1, C, A(0), w.da, C);
        // dbeta += rowsum(dM o Gam o KK);  Bsym = B + B^T with B = diag(beta) (dM o Gam);
        // X += dM o M
        A* bsym = w.dpb + C * C;
        for (int64_t i = 0; i < C; ++i) {
          bsym[i * C + i] = 0;
          for (int64_t l = 0; l < i; ++l) {
            const A dm = w.da[i * C + l];
            const A dmg = dm * w.gam[i * C + l];
            dbeta[i] += dmg * KK[i * C + l];
            const A bil = w.beta[i] * dmg;
            bsym[i * C + l] = bil;
            bsym[l * C + i] = bil;
            w.xg[i * C + l] += bil * KK[i * C + l];  // dM_il * M_il
          }
        }
        // [dQ; dK] += [dPG; Bsym] K
        gemm(false, false, 2 * C, K, C, A(1), w.dpb, C, k, K, A(1), w.dqk, K);
        // dG -= s, and at the chunk end + sum(s) + gamma_C <S, dS'>: s joins X's last row.
        for (int64_t l = 0; l + 1 < C; ++l) w.xg[(C - 1) * C + l] += w.s[l];
        store_gate_grad(w.dG, w.xg, gamma_c * state_dot, len, C, w.col, args.dg + go, p.HV);
        for (int64_t i = 0; i < len; ++i) args.dbeta[go + i * p.HV] = from_acc<T>(dbeta[i]);
        std::memcpy(dSp, w.dS_new, KV * sizeof(A));
      }
      store_rows(dq, K, len, K, A(p.scale), args.dq + qk_offset(p, b, t0, h), p.H * K);
      store_rows(dk, K, len, K, A(1), args.dk + qk_offset(p, b, t0, h), p.H * K);
    }
    if (p.has_h0)
      for (int64_t j = 0; j < p.group(); ++j)
        std::memcpy(args.dh0 + (b * p.HV + h * p.group() + j) * KV, w.dS + j * KV, KV * sizeof(A));
  }
}

GDN_GDR_INSTANTIATE(fused)

}  // namespace gdn::gdr::detail
