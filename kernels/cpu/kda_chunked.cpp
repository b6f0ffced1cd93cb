// The chunked (WY/UT) Kimi Delta Attention on the CPU, forward and backward (docs/design.md 4.11).
//
// Per (sequence, value head) and chunk of C rows with the state S0 at its start, G the in-chunk
// cumsum of g per channel (G_i = g_0 + ... + g_i, a C x K matrix), Gam = exp(G), E_i =
// exp(G_{C-1} - G_i), q scaled:
//   Abar_ij = sum_c k_ic k_jc exp(G_ic - G_jc)  (j < i)    P_ij = sum_c q_ic k_jc exp(G_ic - G_jc)
//   (j <= i) M = (I + diag(beta) Abar)^-1,  Y = V - (K o Gam) S0,  U = M diag(beta) Y O = (Q o Gam)
//   S0 + P U,        S_end = Diag(Gam_{C-1}) S0 + (K o E)^T U
// Every exponent is <= 0 (g <= 0): Abar and P are "gated forms" computed in sub-chunks of 16 rows,
// the diagonal block element by element (exp(G_ic - G_jc), j <= i) and the block of rows I against
// the earlier columns as one GEMM of (X_i o exp(G_i - G_r)) (Y_j o exp(G_r - G_j))^T, r the first
// row of I: both factors' exponents are <= 0, so nothing grows with the distance in the chunk
// (never exp(-G), which overflows fp32 under strong decay).
//
// The backward recomputes a chunk's forward from its saved start state (the residual: the state at
// every chunk start, as the recurrent kernel saves it) and walks the chunks in reverse.
#include <cmath>
#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kda_internal.h"

namespace gdn::kda::detail {

namespace {

using gdr::detail::load_rows;
constexpr int64_t kSub = 16;  // rows of a sub-chunk: the diagonal blocks of the gated forms

// The chunk buffers of one slice (C rows, padded), the state, and for the backward the gradients.
template <typename A>
struct Scratch {
  A* S = nullptr;                                   // K x V running state / dS
  A *q = nullptr, *k, *G, *gam, *e, *qg, *kg, *ke;  // C x K
  A* gl;                                            // K: Gam of the chunk's last row
  A *v, *x, *u;                                     // C x V: Y (in v), diag(beta) Y, U
  A* beta;                                          // C
  A *abar, *p, *m, *inv;                            // C x C (inv: invert's 16 C)
  A *xr, *ei, *yr, *ej, *tmp, *tx, *ty;             // gated-form scratch
  A *d_o = nullptr, *du = nullptr, *dx = nullptr;   // backward
  A *dp = nullptr, *da = nullptr, *dq = nullptr, *dk = nullptr, *dG = nullptr, *t = nullptr;
  A *dq_sum = nullptr, *dk_sum = nullptr;  // T x K: the group's sums over the sequence
  int64_t used = 0;

  Scratch(const gdr::Problem& shape, A* base, bool backward) {
    const int64_t C = shape.chunk, K = shape.K, V = shape.V;
    Carver<A*> c(base);
    S = c.take(K * V);
    c.take_each(C * K, q, k, G, gam, e, qg, kg, ke);
    gl = c.take(K);
    c.take_each(C * V, v, x, u);
    beta = c.take(C);
    c.take_each(C * C, abar, p, m);
    inv = c.take(gdr::detail::invert_tmp_elems(C));
    c.take_each(kSub * K, xr, ei);
    c.take_each(C * K, yr, ej, tmp, tx, ty);
    if (backward) {
      c.take_each(C * V, d_o, du, dx);
      c.take_each(C * C, dp, da);
      c.take_each(C * K, dq, dk, dG, t);
      c.take_each(shape.T * K, dq_sum, dk_sum);
    }
    used = c.used();
  }
};

// F = the gated form of rows X, Y (C x K) under G: F_ij = sum_c X_ic Y_jc exp(G_ic - G_jc) for
// j < i (and j = i when `diag`), 0 elsewhere.
template <typename A>
void gated_form(const A* X, const A* Y, const A* G, int64_t C, int64_t K, bool diag, A* F,
                const Scratch<A>& w) {
  std::memset(F, 0, C * C * sizeof(A));
  for (int64_t r = 0; r < C; r += kSub) {
    for (int64_t i = r; i < r + kSub; ++i)
      for (int64_t j = r; j < (diag ? i + 1 : i); ++j) {
        A s = 0;
        for (int64_t c = 0; c < K; ++c)
          s += X[i * K + c] * Y[j * K + c] * std::exp(G[i * K + c] - G[j * K + c]);
        F[i * C + j] = s;
      }
    if (r == 0) continue;
    // rows of I relative to row r, the columns before it relative to row r: exponents <= 0
    const A* Gr = G + r * K;
    for (int64_t i = 0; i < kSub; ++i)
      for (int64_t c = 0; c < K; ++c)
        w.xr[i * K + c] = X[(r + i) * K + c] * std::exp(G[(r + i) * K + c] - Gr[c]);
    for (int64_t j = 0; j < r; ++j)
      for (int64_t c = 0; c < K; ++c)
        w.yr[j * K + c] = Y[j * K + c] * std::exp(Gr[c] - G[j * K + c]);
    cpu::gemm(false, true, kSub, r, K, A(1), w.xr, K, w.yr, K, A(0), F + r * C, C);
  }
}

// The adjoint of gated_form for dF: dX += dF-weighted rows of Y, dY += those of X, and
// dG += X o (its dX part) - Y o (its dY part) (G_i enters with +, G_j with -).
template <typename A>
void gated_form_backward(const A* X, const A* Y, const A* G, int64_t C, int64_t K, bool diag,
                         const A* dF, A* dX, A* dY, A* dG, const Scratch<A>& w) {
  std::memset(w.tx, 0, C * K * sizeof(A));
  std::memset(w.ty, 0, C * K * sizeof(A));
  for (int64_t r = 0; r < C; r += kSub) {
    for (int64_t i = r; i < r + kSub; ++i)
      for (int64_t j = r; j < (diag ? i + 1 : i); ++j) {
        const A d = dF[i * C + j];
        if (d == 0) continue;
        for (int64_t c = 0; c < K; ++c) {
          const A f = d * std::exp(G[i * K + c] - G[j * K + c]);
          w.tx[i * K + c] += f * Y[j * K + c];
          w.ty[j * K + c] += f * X[i * K + c];
        }
      }
    if (r == 0) continue;
    const A* Gr = G + r * K;
    for (int64_t i = 0; i < kSub; ++i)
      for (int64_t c = 0; c < K; ++c) {
        w.ei[i * K + c] = std::exp(G[(r + i) * K + c] - Gr[c]);
        w.xr[i * K + c] = X[(r + i) * K + c] * w.ei[i * K + c];
      }
    for (int64_t j = 0; j < r; ++j)
      for (int64_t c = 0; c < K; ++c) {
        w.ej[j * K + c] = std::exp(Gr[c] - G[j * K + c]);
        w.yr[j * K + c] = Y[j * K + c] * w.ej[j * K + c];
      }
    // tX[I] += ei o (dF[I, :r] Yr);  tY[:r] += ej o (dF[I, :r]^T Xr)
    cpu::gemm(false, false, kSub, K, r, A(1), dF + r * C, C, w.yr, K, A(0), w.tmp, K);
    for (int64_t i = 0; i < kSub * K; ++i) w.tx[r * K + i] += w.ei[i] * w.tmp[i];
    cpu::gemm(true, false, r, K, kSub, A(1), dF + r * C, C, w.xr, K, A(0), w.tmp, K);
    for (int64_t i = 0; i < r * K; ++i) w.ty[i] += w.ej[i] * w.tmp[i];
  }
  for (int64_t i = 0; i < C * K; ++i) {
    dX[i] += w.tx[i];
    dY[i] += w.ty[i];
    dG[i] += X[i] * w.tx[i] - Y[i] * w.ty[i];
  }
}

// Loads chunk c of value head hv (key head hv / group) of slice s, padded to C rows with zeros
// (g = 0 keeps G at its last real value; q = k = v = beta = 0 add nothing), and computes every
// forward quantity but O and S_end from the start state S0 (header: G, Gam, E, Abar, P, M, Y, U).
template <typename T, typename A>
void prepare_chunk(const Problem& p, const Inputs<T>& in, const Slice& s, int64_t hv, int64_t c,
                   const A* S0, const Scratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, h = hv / p.group();
  const int64_t rows = s.chunk_rows(C, c), tok = s.chunk_token(C, c);
  load_rows(in.q + qk_offset(p, tok, h), p.H * K, rows, K, C, A(p.scale), w.q, K);
  load_rows(in.k + qk_offset(p, tok, h), p.H * K, rows, K, C, A(1), w.k, K);
  load_rows(in.v + vo_offset(p, tok, hv), p.HV * V, rows, V, C, A(1), w.v, V);
  load_rows(in.g + g_offset(p, tok, hv), p.HV * K, rows, K, C, A(1), w.G, K);
  for (int64_t i = 0; i < C; ++i)
    w.beta[i] = i < rows ? to_acc(in.beta[beta_offset(p, tok + i, hv)]) : A(0);
  for (int64_t i = 1; i < C; ++i)
    for (int64_t a = 0; a < K; ++a) w.G[i * K + a] += w.G[(i - 1) * K + a];
  const A* Gl = w.G + (C - 1) * K;
  for (int64_t a = 0; a < K; ++a) w.gl[a] = std::exp(Gl[a]);
  for (int64_t i = 0; i < C; ++i)
    for (int64_t a = 0; a < K; ++a) {
      const int64_t x = i * K + a;
      w.gam[x] = std::exp(w.G[x]);
      w.e[x] = std::exp(Gl[a] - w.G[x]);
      w.qg[x] = w.q[x] * w.gam[x];
      w.kg[x] = w.k[x] * w.gam[x];
      w.ke[x] = w.k[x] * w.e[x];
    }
  gated_form(w.k, w.k, w.G, C, K, false, w.abar, w);
  gated_form(w.q, w.k, w.G, C, K, true, w.p, w);
  for (int64_t i = 0; i < C; ++i)
    for (int64_t j = 0; j < i; ++j) w.m[i * C + j] = w.beta[i] * w.abar[i * C + j];
  gdr::detail::invert_unit_lower(w.m, C, w.inv);
  // Y = V - (K o Gam) S0 (in v);  X = diag(beta) Y;  U = M X
  cpu::gemm(false, false, C, V, K, A(-1), w.kg, K, S0, V, A(1), w.v, V);
  for (int64_t i = 0; i < C; ++i)
    for (int64_t j = 0; j < V; ++j) w.x[i * V + j] = w.beta[i] * w.v[i * V + j];
  cpu::gemm(false, false, C, V, C, A(1), w.m, C, w.x, V, A(0), w.u, V);
}

template <typename T, typename A>
void forward_slice(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                   const Slice& s, const Scratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, hv = s.head;
  copy_or_zero(w.S, p.has_h0 ? in.h0 + s.index * KV : nullptr, KV);
  for (int64_t c = 0; c < s.chunks; ++c) {
    A* S0 = out.residual + s.tile(p.HV, hv, c) * KV;
    std::memcpy(S0, w.S, KV * sizeof(A));
    prepare_chunk(p, in, s, hv, c, S0, w);
    // O = (Q o Gam) S0 + P U (into x, which U has consumed)
    cpu::gemm(false, false, C, V, K, A(1), w.qg, K, S0, V, A(0), w.x, V);
    cpu::gemm(false, false, C, V, C, A(1), w.p, C, w.u, V, A(1), w.x, V);
    gdr::detail::store_rows(w.x, V, s.chunk_rows(C, c), V, A(1),
                            out.o + vo_offset(p, s.chunk_token(C, c), hv), p.HV * V);
    // S_end = Diag(Gam_{C-1}) S0 + (K o E)^T U
    for (int64_t a = 0; a < K; ++a)
      for (int64_t j = 0; j < V; ++j) w.S[a * V + j] *= w.gl[a];
    cpu::gemm(true, false, K, V, C, A(1), w.ke, K, w.u, V, A(1), w.S, V);
  }
  if (p.want_ht) std::memcpy(out.ht + s.index * KV, w.S, KV * sizeof(A));
}

// The backward of chunk c of value head hv given dS = dL/dS_end; leaves dL/dS0 in dS, adds the
// chunk's dq, dk rows to the group's sums, writes dv, dg, dbeta.
template <typename T, typename A>
void backward_chunk(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                    const Slice& s, int64_t hv, int64_t c, const Scratch<A>& w) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V;
  const int64_t rows = s.chunk_rows(C, c), tok = s.chunk_token(C, c);
  const A* S0 = args.residual + s.tile(p.HV, hv, c) * KV;
  A* dS = w.S;
  prepare_chunk(p, in, s, hv, c, S0, w);
  load_rows(args.d_o + vo_offset(p, tok, hv), p.HV * V, rows, V, C, A(1), w.d_o, V);
  // dU = P^T dO + (K o E) dS;  dP = dO U^T (j <= i);  dX = M^T dU;  dA = -dX U^T (j < i)
  cpu::gemm(true, false, C, V, C, A(1), w.p, C, w.d_o, V, A(0), w.du, V);
  cpu::gemm(false, false, C, V, K, A(1), w.ke, K, dS, V, A(1), w.du, V);
  cpu::gemm(false, true, C, C, V, A(1), w.d_o, V, w.u, V, A(0), w.dp, C);
  cpu::gemm(true, false, C, V, C, A(1), w.m, C, w.du, V, A(0), w.dx, V);
  cpu::gemm(false, true, C, C, V, A(-1), w.dx, V, w.u, V, A(0), w.da, C);
  // A = diag(beta) Abar, X = diag(beta) Y: dbeta_i = dA_i . Abar_i + dX_i . Y_i; dAbar =
  // diag(beta) dA; dV = dY = diag(beta) dX (kept in dx)
  for (int64_t i = 0; i < C; ++i) {
    A db = gdr::detail::dot(w.dx + i * V, w.v + i * V, V);
    for (int64_t j = 0; j < C; ++j) {
      A& da = w.da[i * C + j];
      if (j >= i) da = 0;
      db += da * w.abar[i * C + j];
      da *= w.beta[i];
      if (j > i) w.dp[i * C + j] = 0;
    }
    for (int64_t j = 0; j < V; ++j) w.dx[i * V + j] *= w.beta[i];
    if (i < rows) args.dbeta[beta_offset(p, tok + i, hv)] = from_acc<T>(db);
  }
  gdr::detail::store_rows(w.dx, V, rows, V, A(1), args.dv + vo_offset(p, tok, hv), p.HV * V);
  std::memset(w.dq, 0, C * K * sizeof(A));
  std::memset(w.dk, 0, C * K * sizeof(A));
  std::memset(w.dG, 0, C * K * sizeof(A));
  A* dGl = w.dG + (C - 1) * K;
  // Q o Gam: d = dO S0^T;  K o Gam: d = -dY S0^T;  K o E: d = U dS^T (E_i = exp(G_{C-1} - G_i))
  cpu::gemm(false, true, C, K, V, A(1), w.d_o, V, S0, V, A(0), w.t, K);
  for (int64_t x = 0; x < C * K; ++x) {
    w.dq[x] += w.gam[x] * w.t[x];
    w.dG[x] += w.qg[x] * w.t[x];
  }
  cpu::gemm(false, true, C, K, V, A(-1), w.dx, V, S0, V, A(0), w.t, K);
  for (int64_t x = 0; x < C * K; ++x) {
    w.dk[x] += w.gam[x] * w.t[x];
    w.dG[x] += w.kg[x] * w.t[x];
  }
  cpu::gemm(false, true, C, K, V, A(1), w.u, V, dS, V, A(0), w.t, K);
  for (int64_t i = 0; i < C; ++i)
    for (int64_t a = 0; a < K; ++a) {
      const int64_t x = i * K + a;
      const A d = w.ke[x] * w.t[x];
      w.dk[x] += w.e[x] * w.t[x];
      w.dG[x] -= d;
      dGl[a] += d;
    }
  // S_end's Diag(Gam_{C-1}) S0: dG_{C-1} += Gam_{C-1} o rowsum(S0 o dS)
  for (int64_t a = 0; a < K; ++a) dGl[a] += w.gl[a] * gdr::detail::dot(S0 + a * V, dS + a * V, V);
  gated_form_backward(w.q, w.k, w.G, C, K, true, w.dp, w.dq, w.dk, w.dG, w);
  gated_form_backward(w.k, w.k, w.G, C, K, false, w.da, w.dk, w.dk, w.dG, w);
  // dS0 = (Q o Gam)^T dO - (K o Gam)^T dY + Diag(Gam_{C-1}) dS
  for (int64_t a = 0; a < K; ++a)
    for (int64_t j = 0; j < V; ++j) dS[a * V + j] *= w.gl[a];
  cpu::gemm(true, false, K, V, C, A(1), w.qg, K, w.d_o, V, A(1), dS, V);
  cpu::gemm(true, false, K, V, C, A(-1), w.kg, K, w.dx, V, A(1), dS, V);
  // G is the in-chunk cumsum of g: dg_t = sum_{i >= t} dG_i
  for (int64_t i = C - 2; i >= 0; --i)
    for (int64_t a = 0; a < K; ++a) w.dG[i * K + a] += w.dG[(i + 1) * K + a];
  gdr::detail::store_rows(w.dG, K, rows, K, A(1), args.dg + g_offset(p, tok, hv), p.HV * K);
  const int64_t r0 = c * C;
  for (int64_t x = 0; x < rows * K; ++x) {
    w.dq_sum[r0 * K + x] += A(p.scale) * w.dq[x];
    w.dk_sum[r0 * K + x] += w.dk[x];
  }
}

// The backward of key slice (sequence, key head h): the group's value heads in order, each chunk
// by chunk in reverse; dq, dk summed over the group in the scratch, stored at the end.
template <typename T, typename A>
void backward_slice(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                    const Slice& kh, const Scratch<A>& w) {
  const int64_t K = p.K, KV = K * p.V, h = kh.head;
  std::memset(w.dq_sum, 0, kh.len * K * sizeof(A));
  std::memset(w.dk_sum, 0, kh.len * K * sizeof(A));
  for (int64_t hv = h * p.group(); hv < (h + 1) * p.group(); ++hv) {
    const int64_t s = kh.n * p.HV + hv;  // the value slice's row of dht, dh0
    copy_or_zero(w.S, args.dht ? args.dht + s * KV : nullptr, KV);
    for (int64_t c = kh.chunks - 1; c >= 0; --c) backward_chunk(p, in, args, kh, hv, c, w);
    if (p.has_h0) std::memcpy(args.dh0 + s * KV, w.S, KV * sizeof(A));
  }
  gdr::detail::store_rows(w.dq_sum, K, kh.len, K, A(1), args.dq + qk_offset(p, kh.tok0, h),
                          p.H * K);
  gdr::detail::store_rows(w.dk_sum, K, kh.len, K, A(1), args.dk + qk_offset(p, kh.tok0, h),
                          p.H * K);
}

}  // namespace

GDN_KDA_DEFINE_BY_SLICES(chunked, Scratch)

}  // namespace gdn::kda::detail
