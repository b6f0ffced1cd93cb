// The ssd baseline on the CPU: scalar-decay linear attention without the delta rule (no beta),
//   S = exp(g_t) S + k_t v_t^T;  o_t = S^T (scale q_t)
// chunked as the gated delta rule (Vn = V, no W, U, A), one fused pass per slice with chunk
// tiles in per-slice buffers, so the bench shows what the delta rule costs. Per chunk:
//   O = (gamma Q) S + ((Q K^T) o Gam) V,   S' = gamma_C S + K^T (e o V)
// Threads: forward over (b, value head); backward over (b, key head) with the group inside, so
// dq and dk are summed over the group in a fixed order. dbeta is written as zeros.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gdr_chunk_steps.h"

namespace gdn::gdr::detail {

namespace {

using cpu::gemm;

// The per-slice scratch (kernels/gdr_workspace_layout.h: SsdScratch) of each direction.
template <typename A>
struct ForwardScratch : SsdScratch<A*> {
  ForwardScratch(const Problem& p, A* base) : SsdScratch<A*>(p, base, false) {}
};
template <typename A>
struct BackwardScratch : SsdScratch<A*> {
  BackwardScratch(const Problem& p, A* base) : SsdScratch<A*>(p, base, true) {}
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

// One forward slice (b, value head): chunk by chunk, the chunk-start state into the residual,
// P = (Q K^T) o Gam, then O = (gamma Q) S + P V and S' = gamma_C S + (e K)^T V.
template <typename T, typename A>
void forward_slice(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out, int64_t s,
                   const ForwardScratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, NT = p.num_chunks();
  const int64_t b = s / p.HV, hv = s % p.HV, h = hv / p.group();
  copy_or_zero(w.S, p.has_h0 ? in.h0 + s * KV : nullptr, KV);
  for (int64_t c = 0; c < NT; ++c) {
    const int64_t t0 = c * C, len = std::min<int64_t>(C, p.T - t0);
    std::memcpy(out.residual + (s * NT + c) * KV, w.S, KV * sizeof(A));
    load_keys(p, in, b, h, t0, len, w.kq, w.qk);
    load_gates(in.g + gate_offset(p, b, t0, hv), static_cast<const T*>(nullptr), p.HV, len, C, w.G,
               w.gamma, w.e, static_cast<A*>(nullptr));
    load_rows(in.v + vo_offset(p, b, t0, hv), p.HV * V, len, V, C, A(1), w.v, V);
    // P = (Q K^T) o Gam (lower, diagonal included)
    for (int64_t i = 0; i < C; ++i) {
      A* d = w.o;  // Gam_ij, j <= i (o is written later)
      decay_row(w.G, w.G[i], i + 1, d);
      for (int64_t j = 0; j <= i; ++j) w.qk[i * C + j] *= d[j];
      for (int64_t j = i + 1; j < C; ++j) w.qk[i * C + j] = 0;
    }
    output_and_next_state(p, w.kq, w.kq + C * K, w.gamma, w.e, w.qk, w.v, V, w.qg, w.o, w.S, len,
                          out.o + vo_offset(p, b, t0, hv), p.HV * V);
  }
  if (p.want_ht) std::memcpy(out.ht + s * KV, w.S, KV * sizeof(A));
}

// Value head j of key slice (b, h) at chunk c: its part of [dQ; dK] (into w.dqk), its dv, dg,
// and dS' <- dS for the chunk before. The keys (k, scale q, Q K^T) must be loaded.
template <typename T, typename A>
void value_head_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                         int64_t b, int64_t h, int64_t j, int64_t c, int64_t t0, int64_t len,
                         const BackwardScratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V;
  const int64_t hv = h * p.group() + j, go = gate_offset(p, b, t0, hv);
  const A* S = args.residual + ((b * p.HV + hv) * p.num_chunks() + c) * KV;
  A* dSp = w.dS + j * KV;
  const A *k = w.kq, *qs = w.kq + C * K;
  A *dq = w.dqk, *dk = w.dqk + C * K;
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
  query_state_grad(p, w.d_o, S, w.qg, w.gamma, w.DS, w.dG, dq);
  // dV = diag(e) K dS' + P^T dO;  s_i = e_i k_i . (dS' v_i)
  gemm(false, false, C, V, K, A(1), w.ke, K, dSp, V, A(0), w.dv, V);
  for (int64_t i = 0; i < C; ++i) w.s[i] = dot(w.dv + i * V, w.v + i * V, V);
  gemm(true, false, C, V, C, A(1), w.p, C, w.d_o, V, A(1), w.dv, V);
  store_rows(w.dv, V, len, V, A(1), args.dv + vo_offset(p, b, t0, hv), p.HV * V);
  // dS = gamma_C dS' + (diag(gamma) Q)^T dO
  gemm(true, false, K, V, C, A(1), w.qg, K, w.d_o, V, A(0), w.dS_new, V);
  const A state_dot = carry_state_grad(p, w.gamma[C - 1], S, dSp, w.dS_new);
  add_state_key_grad(p, w.v, V, dSp, w.e, w.tmp, dk);
  score_grads(p, w.d_o, w.v, V, w.p, w.gam, qs, w.dp, w.xg, dk);
  gemm(false, false, C, K, C, A(1), w.dp, C, k, K, A(1), dq, K);  // dQ += dPG K
  store_chunk_gate_grad(w.dG, w.xg, w.s, w.gamma[C - 1] * state_dot, len, C, w.col, args.dg + go,
                        p.HV);
  std::memcpy(dSp, w.dS_new, KV * sizeof(A));
}

}  // namespace

int64_t ssd_forward_workspace(const Problem& p) {
  return p.B * p.HV * ForwardScratch<float>(p, nullptr).used;
}
int64_t ssd_backward_workspace(const Problem& p) {
  return p.B * p.H * BackwardScratch<float>(p, nullptr).used;
}

template <typename T>
void ssd_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out) {
  using W = ForwardScratch<acc_t<T>>;
  for_each_slice<W>(p, p.B * p.HV, out.workspace,
                    [&](int64_t s, const W& w) { forward_slice(p, in, out, s, w); });
}

template <typename T>
void ssd_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) {
  using W = BackwardScratch<acc_t<T>>;
  if (args.dbeta)
    for (int64_t i = 0; i < p.B * p.T * p.HV; ++i) args.dbeta[i] = from_acc<T>(acc_t<T>(0));
  for_each_slice<W>(p, p.B * p.H, args.workspace, [&](int64_t kh, const W& w) {
    const int64_t b = kh / p.H, h = kh % p.H;
    backward_key_slice(
        p, args, b, h, w.dS, w.dqk,
        [&](int64_t t0, int64_t len) { load_keys(p, in, b, h, t0, len, w.kq, w.qk); },
        [&](int64_t j, int64_t c, int64_t t0, int64_t len) {
          value_head_backward(p, in, args, b, h, j, c, t0, len, w);
        });
  });
}

GDN_GDR_INSTANTIATE(ssd)

}  // namespace gdn::gdr::detail
