// The chunked (WY/UT) Kimi Delta Attention on the CPU, forward and backward (docs/design.md 4.11).
//
// Per (sequence, value head) and chunk of C rows with the state S0 at its start, G the in-chunk
// cumsum of g per channel (G_i = g_0 + ... + g_i, a C x K matrix), Gam = exp(G),
// E_i = exp(G_{C-1} - G_i), q scaled:
//   Abar_ij = sum_c k_ic k_jc exp(G_ic - G_jc)   (j < i)
//   P_ij    = sum_c q_ic k_jc exp(G_ic - G_jc)   (j <= i)
//   M = (I + diag(beta) Abar)^-1,   Y = V - (K o Gam) S0,   U = M diag(beta) Y
//   O = (Q o Gam) S0 + P U,         S_end = Diag(Gam_{C-1}) S0 + (K o E)^T U
// Every exponent is <= 0 (g <= 0): Abar and P are "gated forms" computed in sub-chunks of 16 rows,
// a diagonal block pair by pair (exp(G_ic - G_jc), j <= i), the rows I of a sub-chunk against the
// earlier columns as one GEMM of (X_i o exp(G_i - G_r)) (k_j o exp(G_r - G_j))^T, r the first row
// of I: both factors' exponents are <= 0, so nothing grows with the distance in the chunk (never
// exp(-G), which overflows fp32 under strong decay). The two forms share every exponential.
//
// The backward recomputes a chunk's forward from its saved start state (the residual: the state at
// every chunk start, as the recurrent kernel saves it) and walks the chunks in reverse.
#include <cstring>

#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kda_internal.h"
#include "kernels/kda_chunk_layout.h"

namespace gdn::kda::detail {

namespace {

using gdr::detail::load_rows;
constexpr int64_t kSub = 16;  // rows of a sub-chunk: the diagonal blocks of the gated forms

// The chunk buffers of one slice (C rows, padded), the state, and for the backward the gradients
// (kernels/kda_chunk_layout.h), with the gated forms' scratch between them.
template <typename A>
struct Scratch : ChunkBuffers<A> {
  A *inv, *xq, *xk, *ei, *drow, *yr, *ej, *tmp, *tq, *tk, *ty;  // inv: invert's 16 C
  int64_t used = 0;

  Scratch(const gdr::Problem& shape, A* base, bool backward) {
    const int64_t C = shape.chunk, K = shape.K, V = shape.V;
    Carver<A*> c(base);
    this->carve_forward(c, C, K, V);
    inv = c.take(gdr::detail::invert_tmp_elems(C));
    c.take_each(kSub * K, xq, xk, ei);
    drow = c.take(K);
    c.take_each(C * K, yr, ej, tmp, tq, tk, ty);
    if (backward) this->carve_backward(c, C, K, V, shape.T);
    used = c.used();
  }
};

// The sub-chunk at row r relative to its first row: ei = exp(G_{r+i} - G_r) (16 x K) and
// ej = exp(G_r - G_j) for j < r (r x K), both exponents <= 0; xq, xk = q, k rows of the
// sub-chunk times ei; yr = k rows before it times ej.
template <typename A>
void relative_rows(const A* q, const A* k, const A* G, int64_t r, int64_t K, const Scratch<A>& w) {
  const A* Gr = G + r * K;
  for (int64_t i = 0; i < kSub; ++i)
    for (int64_t c = 0; c < K; ++c) {
      const int64_t x = i * K + c;
      w.ei[x] = cpu::exp_clamped(G[r * K + x] - Gr[c]);
      w.xq[x] = q[r * K + x] * w.ei[x];
      w.xk[x] = k[r * K + x] * w.ei[x];
    }
  for (int64_t j = 0; j < r; ++j)
    for (int64_t c = 0; c < K; ++c) {
      const int64_t x = j * K + c;
      w.ej[x] = cpu::exp_clamped(Gr[c] - G[x]);
      w.yr[x] = k[x] * w.ej[x];
    }
}

// drow[c] = exp(G_ic - G_jc) for one pair (i, j) of a diagonal block (j <= i: exponents <= 0).
template <typename A>
void pair_decays(const A* G, int64_t i, int64_t j, int64_t K, A* drow) {
  for (int64_t c = 0; c < K; ++c) drow[c] = cpu::exp_clamped(G[i * K + c] - G[j * K + c]);
}

// The chunk's two gated forms (header), which share every exponential: Abar (strictly lower) and
// P (lower with the diagonal); 0 elsewhere. Diagonal 16 x 16 blocks pair by pair, the rows of a
// sub-chunk against the columns before it as GEMMs of rows relative to the sub-chunk's first row.
template <typename A>
void gated_forms(const A* q, const A* k, const A* G, int64_t C, int64_t K, A* abar, A* p,
                 const Scratch<A>& w) {
  std::memset(abar, 0, C * C * sizeof(A));
  std::memset(p, 0, C * C * sizeof(A));
  for (int64_t r = 0; r < C; r += kSub) {
    for (int64_t i = r; i < r + kSub; ++i)
      for (int64_t j = r; j <= i; ++j) {
        pair_decays(G, i, j, K, w.drow);
        A sa = 0, sp = 0;
        for (int64_t c = 0; c < K; ++c) {
          const A kd = k[j * K + c] * w.drow[c];
          sa += k[i * K + c] * kd;
          sp += q[i * K + c] * kd;
        }
        p[i * C + j] = sp;
        if (j < i) abar[i * C + j] = sa;
      }
    if (r == 0) continue;
    relative_rows(q, k, G, r, K, w);
    cpu::gemm(false, true, kSub, r, K, A(1), w.xq, K, w.yr, K, A(0), p + r * C, C);
    cpu::gemm(false, true, kSub, r, K, A(1), w.xk, K, w.yr, K, A(0), abar + r * C, C);
  }
}

// The adjoint of gated_forms for dP (lower) and dAbar (strictly lower): with D_ij = exp(G_i - G_j)
//   tq_i = sum_j dP_ij k_j o D_ij,  tk_i = sum_j dAbar_ij k_j o D_ij  (the rows' side)
//   ty_j = sum_i (dP_ij q_i + dAbar_ij k_i) o D_ij                    (the columns' side)
// then dq += tq, dk += tk + ty, dG += q o tq + k o tk - k o ty (G_i enters with +, G_j with -).
template <typename A>
void gated_forms_backward(const A* q, const A* k, const A* G, int64_t C, int64_t K, const A* dp,
                          const A* da, A* dq, A* dk, A* dG, const Scratch<A>& w) {
  std::memset(w.tq, 0, C * K * sizeof(A));
  std::memset(w.tk, 0, C * K * sizeof(A));
  std::memset(w.ty, 0, C * K * sizeof(A));
  for (int64_t r = 0; r < C; r += kSub) {
    for (int64_t i = r; i < r + kSub; ++i)
      for (int64_t j = r; j <= i; ++j) {
        const A fp = dp[i * C + j], fa = j < i ? da[i * C + j] : A(0);
        if (fp == 0 && fa == 0) continue;
        if (j == i) {  // P_ii = q_i . k_i: no decay, so nothing for dG (its two sides cancel)
          for (int64_t c = 0; c < K; ++c) {
            dq[i * K + c] += fp * k[i * K + c];
            dk[i * K + c] += fp * q[i * K + c];
          }
          continue;
        }
        pair_decays(G, i, j, K, w.drow);
        for (int64_t c = 0; c < K; ++c) {
          const A kd = k[j * K + c] * w.drow[c];
          w.tq[i * K + c] += fp * kd;
          w.tk[i * K + c] += fa * kd;
          w.ty[j * K + c] += (fp * q[i * K + c] + fa * k[i * K + c]) * w.drow[c];
        }
      }
    if (r == 0) continue;
    relative_rows(q, k, G, r, K, w);
    // tq[I] += ei o (dP[I, :r] yr);  tk[I] += ei o (dA[I, :r] yr);
    // ty[:r] += ej o (dP[I, :r]^T xq + dA[I, :r]^T xk)
    cpu::gemm(false, false, kSub, K, r, A(1), dp + r * C, C, w.yr, K, A(0), w.tmp, K);
    for (int64_t x = 0; x < kSub * K; ++x) w.tq[r * K + x] += w.ei[x] * w.tmp[x];
    cpu::gemm(false, false, kSub, K, r, A(1), da + r * C, C, w.yr, K, A(0), w.tmp, K);
    for (int64_t x = 0; x < kSub * K; ++x) w.tk[r * K + x] += w.ei[x] * w.tmp[x];
    cpu::gemm(true, false, r, K, kSub, A(1), dp + r * C, C, w.xq, K, A(0), w.tmp, K);
    cpu::gemm(true, false, r, K, kSub, A(1), da + r * C, C, w.xk, K, A(1), w.tmp, K);
    for (int64_t x = 0; x < r * K; ++x) w.ty[x] += w.ej[x] * w.tmp[x];
  }
  for (int64_t x = 0; x < C * K; ++x) {
    dq[x] += w.tq[x];
    dk[x] += w.tk[x] + w.ty[x];
    dG[x] += q[x] * w.tq[x] + k[x] * (w.tk[x] - w.ty[x]);
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
  load_rows(in.g + gk_offset(p, tok, hv), p.HV * K, rows, K, C, A(1), w.G, K);
  for (int64_t i = 0; i < C; ++i)
    w.beta[i] = i < rows ? to_acc(in.beta[gate_offset(p, tok + i, hv)]) : A(0);
  for (int64_t i = 1; i < C; ++i)
    for (int64_t a = 0; a < K; ++a) w.G[i * K + a] += w.G[(i - 1) * K + a];
  const A* Gl = w.G + (C - 1) * K;
  for (int64_t a = 0; a < K; ++a) w.gl[a] = cpu::exp_clamped(Gl[a]);
  for (int64_t i = 0; i < C; ++i)
    for (int64_t a = 0; a < K; ++a) {
      const int64_t x = i * K + a;
      w.gam[x] = cpu::exp_clamped(w.G[x]);
      w.e[x] = cpu::exp_clamped(Gl[a] - w.G[x]);
      w.qg[x] = w.q[x] * w.gam[x];
      w.kg[x] = w.k[x] * w.gam[x];
      w.ke[x] = w.k[x] * w.e[x];
    }
  gated_forms(w.q, w.k, w.G, C, K, w.abar, w.p, w);
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
    if (i < rows) args.dbeta[gate_offset(p, tok + i, hv)] = from_acc<T>(db);
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
  // K o E enters dG as -s_i in row i and +sum(s) in the last row: kept in t (s_i = (K o E)_i o d_i)
  // and summed for dg directly below
  cpu::gemm(false, true, C, K, V, A(1), w.u, V, dS, V, A(0), w.t, K);
  for (int64_t x = 0; x < C * K; ++x) {
    w.dk[x] += w.e[x] * w.t[x];
    w.t[x] *= w.ke[x];
  }
  // S_end's Diag(Gam_{C-1}) S0: dG_{C-1} += Gam_{C-1} o rowsum(S0 o dS)
  for (int64_t a = 0; a < K; ++a) dGl[a] += w.gl[a] * gdr::detail::dot(S0 + a * V, dS + a * V, V);
  gated_forms_backward(w.q, w.k, w.G, C, K, w.dp, w.da, w.dq, w.dk, w.dG, w);
  // dS0 = (Q o Gam)^T dO - (K o Gam)^T dY + Diag(Gam_{C-1}) dS
  for (int64_t a = 0; a < K; ++a)
    for (int64_t j = 0; j < V; ++j) dS[a * V + j] *= w.gl[a];
  cpu::gemm(true, false, K, V, C, A(1), w.qg, K, w.d_o, V, A(1), dS, V);
  cpu::gemm(true, false, K, V, C, A(-1), w.kg, K, w.dx, V, A(1), dS, V);
  // G is the in-chunk cumsum of g: dg_t = sum_{i >= t} dG_i, and the s terms' -s_i (i >= t) and
  // +sum(s) give sum_{i < t} s_i, summed as such (the two sums cancel under strong decay)
  for (int64_t i = C - 2; i >= 0; --i)
    for (int64_t a = 0; a < K; ++a) w.dG[i * K + a] += w.dG[(i + 1) * K + a];
  std::memset(w.drow, 0, K * sizeof(A));
  for (int64_t i = 0; i < C; ++i)
    for (int64_t a = 0; a < K; ++a) {
      w.dG[i * K + a] += w.drow[a];
      w.drow[a] += w.t[i * K + a];
    }
  gdr::detail::store_rows(w.dG, K, rows, K, A(1), args.dg + gk_offset(p, tok, hv), p.HV * K);
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

GDN_DELTA_RULE_DEFINE_BY_SLICES(chunked, Scratch, sequences)

}  // namespace gdn::kda::detail
