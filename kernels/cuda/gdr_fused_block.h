// The fused gated delta rule, one thread block's work: (batch b, value head hv, V tile of vt
// columns), every chunk in turn (or every sub-chunk, where the plan splits the chunk: the
// backward then recomputes the states inside a chunk from the residual's, load_state), with the
// state tile and all chunk-local matrices in shared memory (layouts: gdr_fused_plan.h). Written
// once for the GPU (gdr_fused.cu) and the CPU emulator (block_exec.h;
// tests/test_fused_emulation.cpp). Math: docs/design.md, "The gated delta rule", with W never
// formed: since W = A Xw and U = A Xu,
//   Vn = U - W S = A Y,   Y = Xu - Xw S = diag(beta) (V - diag(gamma) K S) = diag(beta) Yr,
// so the forward needs K S (C x K x vt) and A Y (C x C x vt) instead of A Xw (C x C x K) and
// W S, and a C x K buffer less. The backward follows from the same form (Z = A^T dVn = dY):
//   dVn = P^T dO + diag(e) K dS'            dP = dO Vn^T             dA = dVn Y^T
//   dM  = strictly_lower(-A^T dA A^T)       dV = diag(beta) Z
//   dQ  = (dP o Gam) K + diag(gamma) dO S^T
//   dK  = (dP o Gam)^T Q + (Bm + Bm^T) K + diag(e) Vn dS'^T - diag(beta gamma) Z S^T,
//         Bm = diag(beta) (dM o Gam)
//   dS  = gamma_C dS' + (diag(gamma) Q)^T dO - K^T diag(beta gamma) Z
//   dbeta = rowsum(Z o Yr) + rowsum(dM o KK o Gam)
//   dG_i  = rowsum(dO o gamma Q S)_i - s_i - beta_i rowsum(Z o gamma K S)_i
//           + rowsum(X)_i - colsum(X)_i (+ sum(s) + gamma_C <S, dS'> at i = C),
//         X = dP o P + dM o M (strictly lower), s_i = e_i rowsum(K dS' o Vn)_i.
// Everything but dV and dh0 (per tile) is a sum over the V tiles (and dq, dk over the value heads
// of a group) of what each block computes from its columns: the blocks of a group add their parts
// to one running sum per chunk in a fixed order, handing it on through a flag, and the last one
// writes the gradient (BackwardWorkspace, gdr_fused_plan.h): deterministic, and one copy of the
// sums in memory however many tiles there are.
// Q is stored scaled (scale q), so dq = scale dQ.
#pragma once
#include <cstdint>

#include "kernels/cuda/block_exec.h"
#include "kernels/cuda/gdr_fused_plan.h"
#include "kernels/cuda/kernel_math.h"

namespace gdn::gdr::fused {

using cuda::BlockExec;
using cuda::ColsOf;
using cuda::hd_exp;
using cuda::KSpan;
using cuda::RowsOf;

// Contraction spans of products with a triangular factor (block_exec.h): the terms outside are
// zero, so they are not computed.
struct LowerA {  // a(i, l) = X[i][l], X lower triangular: l <= i
  GDN_HD KSpan operator()(int, int i_hi, int, int) const { return KSpan{0, i_hi + 1}; }
};
struct LowerAT {  // a(i, l) = X[l][i], X lower triangular (C x C): l >= i
  int C;
  GDN_HD KSpan operator()(int i_lo, int, int, int) const { return KSpan{i_lo, C}; }
};
struct LowerBT {  // b(l, j) = X[j][l], X lower triangular: l <= j
  GDN_HD KSpan operator()(int, int, int, int j_hi) const { return KSpan{0, j_hi + 1}; }
};
// Outputs only needed on and below the diagonal (strictly below when `strict`): blocks wholly
// above it get an empty contraction; the others [begin, end).
struct LowerOutput {
  int begin, end;
  bool strict;
  GDN_HD KSpan operator()(int, int i_hi, int j_lo, int) const {
    return (strict ? j_lo >= i_hi : j_lo > i_hi) ? KSpan{0, 0} : KSpan{begin, end};
  }
};

template <typename T>
struct ForwardArgs {
  const T *q, *k, *v, *g, *beta;
  const acc_t<T>* h0;  // null: zero initial state
  T* o;
  acc_t<T>* ht;        // null: not written
  acc_t<T>* residual;  // the chunk-start states [B, HV, NT, K, V]
};

template <typename T>
struct BackwardArgs {
  const T *q, *k, *v, *g, *beta, *d_o;
  const acc_t<T>* dht;       // null: zero
  const acc_t<T>* residual;  // the chunk-start states
  acc_t<T>* workspace;       // backward_workspace(p, sizeof(T)) elements, flags zeroed
  T *dq, *dk, *dv, *dg, *dbeta;
  acc_t<T>* dh0;  // null: not written
};

// One block's place in the running sums of its group: blocks (value head j of the group, tile)
// add chunk c in the order j * NVT + tile; the last of them writes the gradient.
template <typename A>
struct SumChain {
  A *dq, *dk, *dg, *dbeta;  // the running sums (BackwardWorkspace)
  int* flags;               // [B, H, NT]: blocks of the group that have added chunk c
  int order, last;          // this block's place; the group's last place (G * NVT - 1)
  bool first_tile, last_tile;

  // sum[at] = (earlier places' sum) + part, in that order (the first place starts from part);
  // the last place writes out[at] = scale * sum instead.
  template <typename T>
  GDN_HD void add(A* sum, T* out, int64_t at, A part, bool first, bool last, A scale = 1) const {
    const A total = first ? part : cuda::load_coherent(sum + at) + part;
    if (last) {
      out[at] = from_acc<T>(scale * total);
    } else {
      sum[at] = total;
    }
  }
};

// Loads the chunk at t0 of key head h: kq = [k; scale q] (2C x K) in the input type (scale q
// rounded once, as the tensor cores would round it); rows past T are zero.
template <typename T>
GDN_HD void load_keys(int tid, int threads, const Dims& d, const T* q, const T* k, int64_t b,
                      int64_t h, int64_t t0, T* kq) {
  using A = acc_t<T>;
  const int C = int(d.C), K = int(d.K);
  for (int x = tid; x < 2 * C * K; x += threads) {
    const int r = x / K, l = x % K, row = r % C;
    const int64_t t = t0 + row;
    const T* src = r < C ? k : q;
    const A scale = r < C ? A(1) : A(d.scale);
    kq[x] = from_acc<T>(t < d.T ? scale * to_acc(src[d.qk(b, t, h) + l]) : A(0));
  }
}

// dst (C x vt) = columns v0.. of a [B, T, HV, V] tensor at rows t0..; rows past T are zero.
template <typename T, typename A>
GDN_HD void load_value_tile(int tid, int threads, const Dims& d, const T* src, int64_t b,
                            int64_t hv, int64_t t0, int64_t v0, A* dst) {
  const int C = int(d.C), VT = int(d.vt);
  for (int x = tid; x < C * VT; x += threads) {
    const int64_t t = t0 + x / VT;
    dst[x] = t < d.T ? to_acc(src[d.vo(b, t, hv) + v0 + x % VT]) : A(0);
  }
}

// G = the in-chunk cumulative sum of g, gamma = exp(G), e = exp(G_C - G): thread r < C sums its
// own prefix in the order of the CPU's load_gates (so G_C is the same bits for every r).
template <typename A>
GDN_HD void chunk_gates(int tid, int C, const A* gl, A* G, A* gamma, A* e) {
  if (tid >= C) return;
  A acc = 0, Gr = 0;
  for (int j = 0; j < C; ++j) {
    acc += gl[j];
    if (j == tid) Gr = acc;
  }
  G[tid] = Gr;
  gamma[tid] = hd_exp(Gr);
  e[tid] = hd_exp(acc - Gr);
}

// gl = g and beta of the chunk at t0 for value head hv (zero past T).
template <typename T, typename A>
GDN_HD void load_gates(int tid, int threads, const Dims& d, const T* g, const T* beta, int64_t b,
                       int64_t hv, int64_t t0, A* gl, A* beta_out) {
  for (int r = tid; r < int(d.C); r += threads) {
    const bool real = t0 + r < d.T;
    gl[r] = real ? to_acc(g[d.gate(b, t0 + r, hv)]) : A(0);
    beta_out[r] = real ? to_acc(beta[d.gate(b, t0 + r, hv)]) : A(0);
  }
}

// [k; q] k^T (2C x C x K) -> kkg = KK o Gam (strictly lower), P = QK o Gam (lower), with
// Gam_ij = exp(G_i - G_j). M = diag(beta) kkg is read through an accessor, so the forward and
// the backward's recompute form the same A, bit for bit.
// Without kWithP only KK o Gam is formed (the same bits: each element is summed the same way).
template <typename A, class Path, bool kWithP = true, class Exec, typename KQ>
GDN_HD void key_products(const Exec& ex, int C, int K, const KQ* kq, const A* G, A* kkg, A* p) {
  cuda::block_gemm<A>(
      Path{}, ex, kWithP ? 2 * C : C, C, K, RowsOf<A, KQ>{kq, K}, ColsOf<A, KQ>{kq, K},
      [=](int i, int j, A acc) {
        if (i < C) {
          kkg[i * C + j] = j < i ? acc * hd_exp(G[i] - G[j]) : A(0);
        } else {
          const int r = i - C;
          p[r * C + j] = j <= r ? acc * hd_exp(G[r] - G[j]) : A(0);
        }
      },
      [=](int i_lo, int i_hi, int j_lo, int) {  // rows < C: KK below the diagonal; else QK on it
        const bool dead = i_lo < C ? j_lo >= i_hi : j_lo > i_hi - C;
        return dead ? KSpan{0, 0} : KSpan{0, K};
      });
}

// A = (I + M)^-1 into a (C x C, unit lower; its blocks above the diagonal must already be zero),
// M strictly lower given by m(i, j). Diagonal 16 x 16 blocks by forward substitution, one thread
// per column (A_rl = -M_rl - sum_{l<j<r} M_rj A_jl); then block row I from (I + M) A = I:
//   T = M[I, :I] A[:I, :I],   A[I, :I] = -A_II T   (tinv holds T, 16 x C).
// Runs its own phases (ends with a barrier); fp32 / fp64 arithmetic on every path.
template <typename A, class Exec, class Mop>
GDN_HD void invert_unit_lower(const Exec& ex, int C, const Mop& m, A* a, A* tinv) {
  GDN_EACH_THREAD(ex, tid) {
    if (tid < C) {
      const int base = tid / 16 * 16, l = tid % 16, col = base + l;
      for (int r = 0; r < 16; ++r) {
        const int row = base + r;
        A acc = r == l ? A(1) : A(0);
        if (r > l) {
          acc = -m(row, col);
          for (int j = l + 1; j < r; ++j) acc -= m(row, base + j) * a[(base + j) * C + col];
        }
        a[row * C + col] = acc;
      }
    }
  }
  ex.sync();
  for (int I = 16; I < C; I += 16) {
    cuda::block_gemm<A>(
        cuda::Simt{}, ex, 16, I, I, [=](int i, int l) { return m(I + i, l); },
        [=](int l, int j) { return a[l * C + j]; },
        [=](int i, int j, A acc) { tinv[i * C + j] = acc; });
    ex.sync();
    cuda::block_gemm<A>(
        cuda::Simt{}, ex, 16, I, 16, [=](int i, int l) { return a[(I + i) * C + I + l]; },
        [=](int l, int j) { return tinv[l * C + j]; },
        [=](int i, int j, A acc) { a[(I + i) * C + j] = -acc; });
    ex.sync();
  }
}

// ---- forward ----------------------------------------------------------------------------------

// The shared buffers of one forward step (the forward's own, or the backward's when it recomputes
// a state inside a chunk: then p and og are null and only S is updated).
template <typename T>
struct StepTiles {
  using A = acc_t<T>;
  A* S;
  T* kq;
  A *kkg, *p, *a, *tinv, *y, *og, *vn, *gl, *G, *gamma, *e, *beta;
};

// One forward step over the rows t0.. of slice (b, hv), V tile v0..: with kOutputs, the outputs
// of those rows into o; always the state, S <- S' (ends with a barrier). `a` must hold zeros
// above its diagonal blocks. `in` has q, k, v, g, beta (ForwardArgs or BackwardArgs).
template <typename T, bool kOutputs, class Exec, class In>
GDN_HD void forward_step(const Exec& ex, const Dims& d, const In& in, int64_t b, int64_t hv,
                         int64_t v0, int64_t t0, const StepTiles<T>& m, T* o) {
  using A = acc_t<T>;
  using Path = typename cuda::GemmPath<T>::type;
  const int64_t h = hv / d.G;
  const int C = int(d.C), K = int(d.K), VT = int(d.vt);
  A *S = m.S, *kkg = m.kkg, *p = m.p, *a = m.a, *tinv = m.tinv, *y = m.y, *og = m.og, *vn = m.vn;
  A *G = m.G, *gamma = m.gamma, *e = m.e, *beta = m.beta;
  const T* kq = m.kq;
  GDN_EACH_THREAD(ex, tid) {
    load_keys(tid, ex.threads, d, in.q, in.k, b, h, t0, m.kq);
    load_value_tile(tid, ex.threads, d, in.v, b, hv, t0, v0, y);
    load_gates(tid, ex.threads, d, in.g, in.beta, b, hv, t0, m.gl, beta);
  }
  ex.sync();
  GDN_EACH_THREAD(ex, tid) {
    chunk_gates(tid, C, m.gl, G, gamma, e);
  }
  ex.sync();
  key_products<A, Path, kOutputs>(ex, C, K, kq, G, kkg, p);
  // [k; q] S -> Y = beta (v - gamma K S) (over v), gamma Q S (only k S without outputs)
  cuda::block_gemm<A>(
      Path{}, ex, kOutputs ? 2 * C : C, VT, K, RowsOf<A, T>{kq, K},
      [=](int l, int j) { return S[l * VT + j]; },
      [=](int i, int j, A acc) {
        if (i < C) {
          y[i * VT + j] = beta[i] * (y[i * VT + j] - gamma[i] * acc);
        } else {
          og[(i - C) * VT + j] = gamma[i - C] * acc;
        }
      });
  ex.sync();
  invert_unit_lower(
      ex, C, [=](int i, int j) { return beta[i] * kkg[i * C + j]; }, a, tinv);
  // Vn = A Y
  cuda::block_gemm<A>(
      Path{}, ex, C, VT, C, [=](int i, int l) { return a[i * C + l]; },
      [=](int l, int j) { return y[l * VT + j]; },
      [=](int i, int j, A acc) { vn[i * VT + j] = acc; }, LowerA{});
  ex.sync();
  // O = gamma Q S + P Vn (to global);  S' = gamma_C S + K^T diag(e) Vn
  if constexpr (kOutputs) {
    const int64_t rows = d.T - t0 < d.C ? d.T - t0 : d.C;
    cuda::block_gemm<A>(
        Path{}, ex, C, VT, C, [=](int i, int l) { return p[i * C + l]; },
        [=](int l, int j) { return vn[l * VT + j]; },
        [=](int i, int j, A acc) {
          if (i < rows) o[d.vo(b, t0 + i, hv) + v0 + j] = from_acc<T>(og[i * VT + j] + acc);
        },
        LowerA{});
  }
  const A gamma_c = gamma[C - 1];
  cuda::block_gemm<A>(
      Path{}, ex, K, VT, C, [=](int i, int l) { return e[l] * A(kq[l * K + i]); },
      [=](int l, int j) { return vn[l * VT + j]; },
      [=](int i, int j, A acc) { S[i * VT + j] = gamma_c * S[i * VT + j] + acc; });
  ex.sync();
}

template <typename T, class Exec>
GDN_HD void forward_block(const Exec& ex, const Dims& d, const ForwardArgs<T>& args, acc_t<T>* sm,
                          int64_t block) {
  using A = acc_t<T>;
  const ForwardLayout L(d.C, d.K, d.vt, sizeof(T));
  const int64_t s = block / d.NVT, b = s / d.HV, hv = s % d.HV;
  const int64_t v0 = (block % d.NVT) * d.vt;
  const int K = int(d.K), VT = int(d.vt);
  const StepTiles<T> m{sm + L.S,   reinterpret_cast<T*>(sm + L.kq),
                       sm + L.kkg, sm + L.p,
                       sm + L.a,   sm + L.tinv,
                       sm + L.y,   sm + L.og,
                       sm + L.vn,  sm + L.gl,
                       sm + L.G,   sm + L.gamma,
                       sm + L.e,   sm + L.beta};
  A* S = m.S;

  GDN_EACH_THREAD(ex, tid) {
    for (int x = tid; x < K * VT; x += ex.threads)
      S[x] = args.h0 ? args.h0[(s * d.K + x / VT) * d.V + v0 + x % VT] : A(0);
    for (int x = tid; x < int(d.C * d.C); x += ex.threads) m.a[x] = 0;
  }
  ex.sync();
  for (int64_t c = 0; c < d.NT; ++c) {
    // the residual: the state at the start of every R-th step (the Problem's chunks)
    if (args.residual && c % d.R == 0) {
      GDN_EACH_THREAD(ex, tid) {
        A* r = args.residual + (s * d.NR + c / d.R) * d.K * d.V + v0;
        for (int x = tid; x < K * VT; x += ex.threads) r[(x / VT) * d.V + x % VT] = S[x];
      }
    }
    forward_step<T, true>(ex, d, args, b, hv, v0, c * d.C, m, args.o);
  }
  if (args.ht) {
    GDN_EACH_THREAD(ex, tid) {
      for (int x = tid; x < K * VT; x += ex.threads)
        args.ht[(s * d.K + x / VT) * d.V + v0 + x % VT] = S[x];
    }
  }
}

// ---- backward ---------------------------------------------------------------------------------

// The state of slice s at the start of step c (V tile v0..) from the residual, which holds it at
// every R-th step: the saved state, then c % R forward steps (the backward's recompute; ends with
// a barrier when it runs any). A step reads S only after its loads and two barriers, so the load
// of S needs no barrier of its own.
template <typename T, class Exec>
GDN_HD void load_state(const Exec& ex, const Dims& d, const BackwardArgs<T>& args, int64_t s,
                       int64_t v0, int64_t c, const StepTiles<T>& m) {
  using A = acc_t<T>;
  const int VT = int(d.vt);
  GDN_EACH_THREAD(ex, tid) {
    const A* r = args.residual + (s * d.NR + c / d.R) * d.K * d.V + v0;
    for (int x = tid; x < int(d.K) * VT; x += ex.threads) m.S[x] = r[(x / VT) * d.V + x % VT];
  }
  for (int64_t step = c - c % d.R; step < c; ++step)
    forward_step<T, false>(ex, d, args, s / d.HV, s % d.HV, v0, step * d.C, m, nullptr);
}

template <typename T, class Exec>
GDN_HD void backward_block(const Exec& ex, const Dims& d, const BackwardArgs<T>& args,
                           acc_t<T>* sm) {
  using A = acc_t<T>;
  using Path = typename cuda::GemmPath<T>::type;
  const BackwardLayout L(d.C, d.K, d.vt, ex.threads, sizeof(T));
  const BackwardWorkspace W(d, sizeof(A));
  A* ws = args.workspace;
  int* flags = reinterpret_cast<int*>(ws + W.flags);
  // The ticket orders the blocks of a group (consecutive tickets) as their running sums need.
  const int64_t block = ex.claim_ticket(flags + W.counter, reinterpret_cast<int*>(sm + L.ticket));
  const int64_t s = block / d.NVT, b = s / d.HV, hv = s % d.HV, h = hv / d.G;
  const int64_t tile = block % d.NVT, v0 = tile * d.vt;
  const SumChain<A> chain{ws + W.dq,
                          ws + W.dk,
                          ws + W.dg,
                          ws + W.dbeta,
                          flags + (b * d.H + h) * d.NT,
                          int((hv % d.G) * d.NVT + tile),
                          int(d.G * d.NVT - 1),
                          tile == 0,
                          tile == d.NVT - 1};
  const int C = int(d.C), K = int(d.K), VT = int(d.vt);
  A *S = sm + L.S, *dS = sm + L.dS, *kkg = sm + L.kkg, *p = sm + L.p;
  A *a = sm + L.a, *dpg = sm + L.dpg, *xg = sm + L.xg, *da = sm + L.da, *yr = sm + L.yr;
  A *ksg = sm + L.ksg, *qd = sm + L.qd, *dO = sm + L.dO, *kd = sm + L.kd, *vn = sm + L.vn;
  A *gl = sm + L.gl, *G = sm + L.G, *gamma = sm + L.gamma, *e = sm + L.e, *beta = sm + L.beta;
  A *avec = sm + L.avec, *svec = sm + L.svec, *zy = sm + L.zy, *zk = sm + L.zk;
  A *red = sm + L.red, *consts = sm + L.consts;
  T* kq = reinterpret_cast<T*>(sm + L.kq);
  const T* qs = kq + C * K;  // scale q
  // the buffers a recomputed forward step uses (the inversion's block row in dpg, Y in yr)
  const StepTiles<T> steps{S, kq, kkg, nullptr, a, dpg, yr, nullptr, vn, gl, G, gamma, e, beta};

  GDN_EACH_THREAD(ex, tid) {
    for (int x = tid; x < K * VT; x += ex.threads)
      dS[x] = args.dht ? args.dht[(s * d.K + x / VT) * d.V + v0 + x % VT] : A(0);
    for (int x = tid; x < C * C; x += ex.threads) a[x] = 0;
  }
  ex.sync();
  for (int64_t c = d.NT - 1; c >= 0; --c) {
    const int64_t t0 = c * d.C, rows = d.T - t0 < d.C ? d.T - t0 : d.C;
    load_state<T>(ex, d, args, s, v0, c, steps);
    GDN_EACH_THREAD(ex, tid) {
      load_keys(tid, ex.threads, d, args.q, args.k, b, h, t0, kq);
      load_value_tile(tid, ex.threads, d, args.v, b, hv, t0, v0, yr);
      load_value_tile(tid, ex.threads, d, args.d_o, b, hv, t0, v0, dO);
      load_gates(tid, ex.threads, d, args.g, args.beta, b, hv, t0, gl, beta);
    }
    ex.sync();
    GDN_EACH_THREAD(ex, tid) {
      chunk_gates(tid, C, gl, G, gamma, e);
      A acc = 0;  // this thread's part of <S, dS'>
      for (int x = tid; x < K * VT; x += ex.threads) acc += S[x] * dS[x];
      red[tid] = acc;
    }
    ex.sync();
    key_products<A, Path>(ex, C, K, kq, G, kkg, p);
    // [k; q] S -> gamma K S, Yr = v - gamma K S (over v), gamma Q S o dO
    cuda::block_gemm<A>(
        Path{}, ex, 2 * C, VT, K, RowsOf<A, T>{kq, K}, [=](int l, int j) { return S[l * VT + j]; },
        [=](int i, int j, A acc) {
          if (i < C) {
            const A ks = gamma[i] * acc;
            ksg[i * VT + j] = ks;
            yr[i * VT + j] -= ks;
          } else {
            const int r = i - C;
            qd[r * VT + j] = gamma[r] * acc * dO[r * VT + j];
          }
        });
    // K dS'
    cuda::block_gemm<A>(
        Path{}, ex, C, VT, K, RowsOf<A, T>{kq, K}, [=](int l, int j) { return dS[l * VT + j]; },
        [=](int i, int j, A acc) { kd[i * VT + j] = acc; });
    GDN_EACH_THREAD(ex, tid) {
      if (tid == 0) {
        A acc = 0;
        for (int t = 0; t < ex.threads; ++t) acc += red[t];
        consts[0] = gamma[C - 1] * acc;  // gamma_C <S, dS'>
      }
    }
    ex.sync();
    // A = (I + M)^-1, M = diag(beta) (KK o Gam); its block row goes through dpg (free here)
    invert_unit_lower(
        ex, C, [=](int i, int j) { return beta[i] * kkg[i * C + j]; }, a, dpg);
    // Vn = A diag(beta) Yr;  avec = rowsum(gamma Q S o dO)
    cuda::block_gemm<A>(
        Path{}, ex, C, VT, C, [=](int i, int l) { return a[i * C + l]; },
        [=](int l, int j) { return beta[l] * yr[l * VT + j]; },
        [=](int i, int j, A acc) { vn[i * VT + j] = acc; }, LowerA{});
    GDN_EACH_THREAD(ex, tid) {
      if (tid < C) {
        A acc = 0;
        for (int j = 0; j < VT; ++j) acc += qd[tid * VT + j];
        avec[tid] = acc;
      }
    }
    ex.sync();
    // dVn = P^T dO + diag(e) K dS' (over qd);  dP = dO Vn^T -> dP o Gam, X = dP o P;  s
    cuda::block_gemm<A>(
        Path{}, ex, C, VT, C, [=](int i, int l) { return p[l * C + i]; },
        [=](int l, int j) { return dO[l * VT + j]; },
        [=](int i, int j, A acc) { qd[i * VT + j] = acc + e[i] * kd[i * VT + j]; }, LowerAT{C});
    cuda::block_gemm<A>(
        Path{}, ex, C, C, VT, [=](int i, int l) { return dO[i * VT + l]; },
        [=](int l, int j) { return vn[j * VT + l]; },
        [=](int i, int j, A acc) {
          dpg[i * C + j] = j <= i ? acc * hd_exp(G[i] - G[j]) : A(0);
          xg[i * C + j] = j < i ? acc * p[i * C + j] : A(0);
        },
        LowerOutput{0, VT, false});
    GDN_EACH_THREAD(ex, tid) {
      if (tid < C) {
        A acc = 0;
        for (int j = 0; j < VT; ++j) acc += kd[tid * VT + j] * vn[tid * VT + j];
        svec[tid] = e[tid] * acc;
      }
    }
    ex.sync();
    // Z = A^T dVn (over kd);  dA = dVn Y^T;  then, once the group's earlier blocks have added
    // chunk c, dQ = (dP o Gam) K + diag(gamma) dO S^T (this block's part, into the running sum)
    cuda::block_gemm<A>(
        Path{}, ex, C, VT, C, [=](int i, int l) { return a[l * C + i]; },
        [=](int l, int j) { return qd[l * VT + j]; },
        [=](int i, int j, A acc) { kd[i * VT + j] = acc; }, LowerAT{C});
    cuda::block_gemm<A>(
        Path{}, ex, C, C, VT, [=](int i, int l) { return qd[i * VT + l]; },
        [=](int l, int j) { return beta[j] * yr[j * VT + l]; },
        [=](int i, int j, A acc) { da[i * C + j] = acc; });
    ex.wait_for(chain.flags + c, chain.order);
    cuda::block_gemm<A>(
        Path{}, ex, C, K, C + VT,
        [=](int i, int l) { return l < C ? dpg[i * C + l] : gamma[i] * dO[i * VT + l - C]; },
        [=](int l, int j) { return l < C ? A(kq[l * K + j]) : S[j * VT + l - C]; },
        [=](int i, int j, A acc) {
          if (i < rows)
            chain.add(chain.dq, args.dq, d.qk(b, t0 + i, h) + j, acc, chain.order == 0,
                      chain.order == chain.last, A(d.scale));
        });
    GDN_EACH_THREAD(ex, tid) {
      if (tid == 0) {
        A acc = consts[0];
        for (int i = 0; i < C; ++i) acc += svec[i];
        consts[1] = acc;  // the gate constant of the last row: sum(s) + gamma_C <S, dS'>
      }
    }
    ex.sync();
    // T1 = dA A^T (over p);  dV = diag(beta) Z;  zy = rowsum(Z o Yr), avec -= s + beta zk
    cuda::block_gemm<A>(
        Path{}, ex, C, C, C, [=](int i, int l) { return da[i * C + l]; },
        [=](int l, int j) { return a[j * C + l]; },
        [=](int i, int j, A acc) { p[i * C + j] = acc; }, LowerBT{});
    GDN_EACH_THREAD(ex, tid) {
      for (int x = tid; x < C * VT; x += ex.threads) {
        const int i = x / VT;
        if (i < rows) args.dv[d.vo(b, t0 + i, hv) + v0 + x % VT] = from_acc<T>(beta[i] * kd[x]);
      }
      if (tid < C) {
        A acc_y = 0, acc_k = 0;
        for (int j = 0; j < VT; ++j) {
          acc_y += kd[tid * VT + j] * yr[tid * VT + j];
          acc_k += kd[tid * VT + j] * ksg[tid * VT + j];
        }
        zy[tid] = acc_y;
        zk[tid] = acc_k;
        avec[tid] = avec[tid] - svec[tid] - beta[tid] * acc_k;
      }
    }
    ex.sync();
    // dM = strictly_lower(-A^T T1) (over da);  X += dM o M
    cuda::block_gemm<A>(
        Path{}, ex, C, C, C, [=](int i, int l) { return a[l * C + i]; },
        [=](int l, int j) { return p[l * C + j]; },
        [=](int i, int j, A acc) {
          const A dm = j < i ? -acc : A(0);
          da[i * C + j] = dm;
          xg[i * C + j] += dm * beta[i] * kkg[i * C + j];
        },
        [=](int i_lo, int i_hi, int j_lo, int) {  // A^T: l >= i; only below the diagonal
          return j_lo >= i_hi ? KSpan{0, 0} : KSpan{i_lo, C};
        });
    ex.sync();
    // Bsym = Bm + Bm^T (over p);  dbeta, dg (into the running sums over the V tiles)
    GDN_EACH_THREAD(ex, tid) {
      for (int x = tid; x < C * C; x += ex.threads) {
        const int i = x / C, j = x % C;
        A v = 0;
        if (j < i) v = beta[i] * da[x] * hd_exp(G[i] - G[j]);
        if (i < j) v = beta[j] * da[j * C + i] * hd_exp(G[j] - G[i]);
        p[x] = v;
      }
      if (tid < rows) {
        A acc = 0;
        for (int j = 0; j < tid; ++j) acc += da[tid * C + j] * kkg[tid * C + j];
        const int64_t at = d.gate(b, t0 + tid, hv);
        chain.add(chain.dbeta, args.dbeta, at, zy[tid] + acc, chain.first_tile, chain.last_tile);
        chain.add(chain.dg, args.dg, at, cuda::gate_grad_at(tid, avec, xg, consts[1], C),
                  chain.first_tile, chain.last_tile);
      }
    }
    ex.sync();
    // dK = (dP o Gam)^T Q + Bsym K + diag(e) Vn dS'^T - diag(beta gamma) Z S^T (this block's
    // part, into the running sum); then chunk c is handed to the group's next block
    cuda::block_gemm<A>(
        Path{}, ex, C, K, 2 * C + 2 * VT,
        [=](int i, int l) {
          if (l < C) return dpg[l * C + i];
          if (l < 2 * C) return p[i * C + l - C];
          if (l < 2 * C + VT) return e[i] * vn[i * VT + l - 2 * C];
          return -beta[i] * gamma[i] * kd[i * VT + l - 2 * C - VT];
        },
        [=](int l, int j) {
          if (l < C) return A(qs[l * K + j]);
          if (l < 2 * C) return A(kq[(l - C) * K + j]);
          if (l < 2 * C + VT) return dS[j * VT + l - 2 * C];
          return S[j * VT + l - 2 * C - VT];
        },
        [=](int i, int j, A acc) {
          if (i < rows)
            chain.add(chain.dk, args.dk, d.qk(b, t0 + i, h) + j, acc, chain.order == 0,
                      chain.order == chain.last);
        });
    ex.release(chain.flags + c, chain.order + 1);  // a barrier too
    // dS = gamma_C dS' + (diag(gamma) Q)^T dO - K^T diag(beta gamma) Z
    const A gamma_c = gamma[C - 1];
    cuda::block_gemm<A>(
        Path{}, ex, K, VT, 2 * C,
        [=](int i, int l) { return l < C ? gamma[l] * A(qs[l * K + i]) : A(kq[(l - C) * K + i]); },
        [=](int l, int j) {
          return l < C ? dO[l * VT + j] : -beta[l - C] * gamma[l - C] * kd[(l - C) * VT + j];
        },
        [=](int i, int j, A acc) { dS[i * VT + j] = gamma_c * dS[i * VT + j] + acc; });
    ex.sync();
  }
  if (args.dh0) {
    GDN_EACH_THREAD(ex, tid) {
      for (int x = tid; x < K * VT; x += ex.threads)
        args.dh0[(s * d.K + x / VT) * d.V + v0 + x % VT] = dS[x];
    }
  }
}

}  // namespace gdn::gdr::fused
