// The ssd baseline on the CPU: scalar-decay linear attention without the delta rule (no beta),
//   S = exp(g_t) S + k_t v_t^T;  o_t = S^T (scale q_t)
// chunked as the gated delta rule (Vn = V, no W, U, A), one fused pass per slice with chunk
// tiles in per-slice buffers, so the bench shows what the delta rule costs. Per chunk:
//   O = (gamma Q) S + ((Q K^T) o Gam) V,   S' = gamma_C S + K^T (e o V)
// Threads: forward over (b, value head); backward over (b, key head) with the group inside, so
// dq and dk are summed over the group in a fixed order. dbeta is written as zeros.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gdr_internal.h"

namespace gdn::gdr::detail {

namespace {

using cpu::gemm;

template <typename A>
struct Scratch {
  A *kq, *qk, *dqk;  // [k; scale q], Q K^T (later P), [dQ; dK] sums over the group
  A *v, *d_o, *G, *gamma, *e, *dG, *s, *gam, *p, *qg, *ke, *o, *DS, *dv, *dp, *xg, *col, *tmp,
      *dS_new;
  A *S, *dS;  // S (forward) / dS' of every value head of the group (backward)
  Scratch(const Problem& pr, A* base, bool backward) {
    const int64_t C = pr.chunk, K = pr.K, V = pr.V;
    Carver<A> c(base);
    kq = c.take(2 * C * K);
    qk = c.take(C * C);
    v = c.take(C * V);
    G = c.take(C);
    gamma = c.take(C);
    e = c.take(C);
    qg = c.take(C * K);
    if (!backward) {
      o = c.take(C * V);
      S = c.take(K * V);
    } else {
      dqk = c.take(2 * C * K);
      d_o = c.take(C * V);
      dG = c.take(C);
      s = c.take(C);
      gam = c.take(C * C);
      p = c.take(C * C);
      ke = c.take(C * K);
      DS = c.take(C * K);
      dv = c.take(C * V);
      dp = c.take(C * C);
      xg = c.take(C * C);
      col = c.take(C);
      tmp = c.take(C * K);
      dS_new = c.take(K * V);
      dS = c.take(pr.group() * K * V);
    }
    used = c.used();
  }
  int64_t used = 0;
};

// Loads [k; scale q] of one chunk and forms Q K^T.
template <typename T, typename A>
void load_keys(const Problem& p, const Inputs<T>& in, int64_t b, int64_t h, int64_t t0, int64_t len,
               A* kq, A* qk) {
  const int64_t C = p.chunk, K = p.K;
  load_rows(in.k + qk_offset(p, b, t0, h), p.H * K, len, K, C, A(1), kq, K);
  load_rows(in.q + qk_offset(p, b, t0, h), p.H * K, len, K, C, A(p.scale), kq + C * K, K);
  gemm(false, true, C, C, K, A(1), kq + C * K, K, kq, K, A(0), qk, C);
}

}  // namespace

int64_t ssd_forward_workspace(const Problem& p) {
  return p.B * p.HV * Scratch<float>(p, nullptr, false).used;
}
int64_t ssd_backward_workspace(const Problem& p) {
  return p.B * p.H * Scratch<float>(p, nullptr, true).used;
}

template <typename T>
void ssd_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out) {
  using A = acc_t<T>;
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, NT = p.num_chunks();
  const int64_t per_slice = Scratch<A>(p, nullptr, false).used;
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < p.B * p.HV; ++s) {
    const int64_t b = s / p.HV, hv = s % p.HV, h = hv / p.group();
    Scratch<A> w(p, out.workspace + s * per_slice, false);
    if (p.has_h0) {
      std::memcpy(w.S, in.h0 + s * KV, KV * sizeof(A));
    } else {
      std::memset(w.S, 0, KV * sizeof(A));
    }
    for (int64_t c = 0; c < NT; ++c) {
      const int64_t t0 = c * C, len = std::min(C, p.T - t0);
      std::memcpy(out.residual + (s * NT + c) * KV, w.S, KV * sizeof(A));
      load_keys(p, in, b, h, t0, len, w.kq, w.qk);
      const A* k = w.kq;
      const A* qs = w.kq + C * K;
      load_gates(in.g + gate_offset(p, b, t0, hv), static_cast<const T*>(nullptr), p.HV, len, C,
                 w.G, w.gamma, w.e, static_cast<A*>(nullptr));
      load_rows(in.v + vo_offset(p, b, t0, hv), p.HV * V, len, V, C, A(1), w.v, V);
      // P = (Q K^T) o Gam (lower, diagonal included)
      for (int64_t i = 0; i < C; ++i) {
        A* d = w.o;  // Gam_ij, j <= i (o is written later)
        decay_row(w.G, w.G[i], i + 1, d);
        for (int64_t j = 0; j <= i; ++j) w.qk[i * C + j] *= d[j];
        for (int64_t j = i + 1; j < C; ++j) w.qk[i * C + j] = 0;
      }
      // O = (gamma Q) S + P V
      for (int64_t i = 0; i < C; ++i)
        for (int64_t l = 0; l < K; ++l) w.qg[i * K + l] = w.gamma[i] * qs[i * K + l];
      gemm(false, false, C, V, K, A(1), w.qg, K, w.S, V, A(0), w.o, V);
      gemm(false, false, C, V, C, A(1), w.qk, C, w.v, V, A(1), w.o, V);
      store_rows(w.o, V, len, V, A(1), out.o + vo_offset(p, b, t0, hv), p.HV * V);
      // S' = gamma_C S + (e K)^T V
      const A gamma_c = w.gamma[C - 1];
      for (int64_t l = 0; l < KV; ++l) w.S[l] *= gamma_c;
      for (int64_t i = 0; i < C; ++i)
        for (int64_t l = 0; l < K; ++l) w.qg[i * K + l] = w.e[i] * k[i * K + l];
      gemm(true, false, K, V, C, A(1), w.qg, K, w.v, V, A(1), w.S, V);
    }
    if (p.want_ht) std::memcpy(out.ht + s * KV, w.S, KV * sizeof(A));
  }
}

template <typename T>
void ssd_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) {
  using A = acc_t<T>;
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, NT = p.num_chunks();
  const int64_t per_slice = Scratch<A>(p, nullptr, true).used;
  if (args.dbeta)
    for (int64_t i = 0; i < p.B * p.T * p.HV; ++i) args.dbeta[i] = from_acc<T>(A(0));
#pragma omp parallel for schedule(static)
  for (int64_t kh = 0; kh < p.B * p.H; ++kh) {
    const int64_t b = kh / p.H, h = kh % p.H;
    Scratch<A> w(p, args.workspace + kh * per_slice, true);
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
      load_keys(p, in, b, h, t0, len, w.kq, w.qk);
      const A* k = w.kq;
      const A* qs = w.kq + C * K;
      A* dq = w.dqk;
      A* dk = w.dqk + C * K;
      std::memset(w.dqk, 0, 2 * C * K * sizeof(A));
      for (int64_t j = 0; j < p.group(); ++j) {
        const int64_t hv = h * p.group() + j, s = b * p.HV + hv;
        const A* S = args.residual + (s * NT + c) * KV;
        A* dSp = w.dS + j * KV;
        const int64_t go = gate_offset(p, b, t0, hv);
        load_rows(in.v + vo_offset(p, b, t0, hv), p.HV * V, len, V, C, A(1), w.v, V);
        load_rows(args.d_o + vo_offset(p, b, t0, hv), p.HV * V, len, V, C, A(1), w.d_o, V);
        load_gates(in.g + go, static_cast<const T*>(nullptr), p.HV, len, C, w.G, w.gamma, w.e,
                   static_cast<A*>(nullptr));
        decay_matrix(w.G, C, w.gam);
        for (int64_t l = 0; l < C * C; ++l) w.p[l] = w.qk[l] * w.gam[l];
        for (int64_t i = 0; i < C; ++i)
          for (int64_t l = 0; l < K; ++l) {
            w.qg[i * K + l] = w.gamma[i] * qs[i * K + l];
            w.ke[i * K + l] = w.e[i] * k[i * K + l];
          }
        // dG = a + rowsum(X) - colsum(X) (+ c at the end), X strictly lower: see store_gate_grad.
        // DS = dO S^T: dQ += diag(gamma) DS;  a_i = (gamma_i q_i) . DS_i
        gemm(false, true, C, K, V, A(1), w.d_o, V, S, V, A(0), w.DS, K);
        for (int64_t i = 0; i < C; ++i) {
          w.dG[i] = dot(w.qg + i * K, w.DS + i * K, K);
          for (int64_t l = 0; l < K; ++l) dq[i * K + l] += w.gamma[i] * w.DS[i * K + l];
        }
        // dV = diag(e) K dS' + P^T dO;  s_i = e_i k_i . (dS' v_i)
        gemm(false, false, C, V, K, A(1), w.ke, K, dSp, V, A(0), w.dv, V);
        for (int64_t i = 0; i < C; ++i) w.s[i] = dot(w.dv + i * V, w.v + i * V, V);
        gemm(true, false, C, V, C, A(1), w.p, C, w.d_o, V, A(1), w.dv, V);
        store_rows(w.dv, V, len, V, A(1), args.dv + vo_offset(p, b, t0, hv), p.HV * V);
        // dS = gamma_C dS' + (diag(gamma) Q)^T dO
        const A gamma_c = w.gamma[C - 1];
        gemm(true, false, K, V, C, A(1), w.qg, K, w.d_o, V, A(0), w.dS_new, V);
        A state_dot = 0;
        for (int64_t l = 0; l < KV; ++l) {
          state_dot += S[l] * dSp[l];
          w.dS_new[l] += gamma_c * dSp[l];
        }
        // dK += diag(e) V dS'^T
        gemm(false, true, C, K, V, A(1), w.v, V, dSp, V, A(0), w.tmp, K);
        for (int64_t i = 0; i < C; ++i)
          for (int64_t l = 0; l < K; ++l) dk[i * K + l] += w.e[i] * w.tmp[i * K + l];
        // dP = dO V^T;  X = dP o P (strictly lower; the diagonal cancels);  dPG = dP o Gam
        gemm(false, true, C, C, V, A(1), w.d_o, V, w.v, V, A(0), w.dp, C);
        for (int64_t i = 0; i < C; ++i) {
          for (int64_t l = 0; l < i; ++l) w.xg[i * C + l] = w.dp[i * C + l] * w.p[i * C + l];
          for (int64_t l = 0; l < C; ++l) w.dp[i * C + l] *= w.gam[i * C + l];
        }
        // dQ += dPG K;  dK += dPG^T Q
        gemm(false, false, C, K, C, A(1), w.dp, C, k, K, A(1), dq, K);
        gemm(true, false, C, K, C, A(1), w.dp, C, qs, K, A(1), dk, K);
        // dG -= s, and at the chunk end + sum(s) + gamma_C <S, dS'>: s joins X's last row.
        for (int64_t l = 0; l + 1 < C; ++l) w.xg[(C - 1) * C + l] += w.s[l];
        store_gate_grad(w.dG, w.xg, gamma_c * state_dot, len, C, w.col, args.dg + go, p.HV);
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

GDN_GDR_INSTANTIATE(ssd)

}  // namespace gdn::gdr::detail
