// The pieces of the fused gated delta rule's block code (gdr_fused_block.h), for the GPU and the
// CPU emulator alike (block_exec.h): the kernels' arguments, the running sums of the backward
// (SumChain), the loads of one (sub-)chunk, the key products and the inversion, and one forward
// step, which the forward runs for every chunk and the backward's recompute for the states inside
// a chunk. Math: docs/design.md, "The gated delta rule", and gdr_fused_block.h.
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
  acc_t<T>* residual;  // the chunk-start states [sequence][HV][chunk][K, V]
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
  int* flags;               // the group's, one per step: blocks that have added step c
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

// Loads the step at `at` of key head h: kq = [k; scale q] (2C x K) in the input type (scale q
// rounded once, as the tensor cores would round it); rows past the step's (its sequence's end)
// are zero.
template <typename T>
GDN_HD void load_keys(int tid, int threads, const Dims& d, const T* q, const T* k, int64_t h,
                      const StepRows& at, T* kq) {
  using A = acc_t<T>;
  const int C = int(d.C), K = int(d.K);
  for (int x = tid; x < 2 * C * K; x += threads) {
    const int r = x / K, l = x % K, row = r % C;
    const T* src = r < C ? k : q;
    const A scale = r < C ? A(1) : A(d.scale);
    kq[x] = from_acc<T>(row < at.rows ? scale * to_acc(src[d.qk(at.tok + row, h) + l]) : A(0));
  }
}

// dst (C x vt) = columns v0.. of a [B, T, HV, V] tensor at the step's rows; padding rows are
// zero.
template <typename T, typename A>
GDN_HD void load_value_tile(int tid, int threads, const Dims& d, const T* src, int64_t hv,
                            const StepRows& at, int64_t v0, A* dst) {
  const int C = int(d.C), VT = int(d.vt);
  for (int x = tid; x < C * VT; x += threads) {
    const int64_t row = x / VT;
    dst[x] = row < at.rows ? to_acc(src[d.vo(at.tok + row, hv) + v0 + x % VT]) : A(0);
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

// gl = g and beta of the step's rows for value head hv (zero on padding rows: a sequence's
// last partial step never reads the next sequence's gates).
template <typename T, typename A>
GDN_HD void load_gates(int tid, int threads, const Dims& d, const T* g, const T* beta, int64_t hv,
                       const StepRows& at, A* gl, A* beta_out) {
  for (int r = tid; r < int(d.C); r += threads) {
    const bool real = r < at.rows;
    gl[r] = real ? to_acc(g[d.gate(at.tok + r, hv)]) : A(0);
    beta_out[r] = real ? to_acc(beta[d.gate(at.tok + r, hv)]) : A(0);
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

// ---- the forward step -------------------------------------------------------------------------

// The shared buffers of one forward step (the forward's own, or the backward's when it recomputes
// a state inside a chunk: then p and og are null and only S is updated).
template <typename T>
struct StepTiles {
  using A = acc_t<T>;
  A* S;
  T* kq;
  A *kkg, *p, *a, *tinv, *y, *og, *vn, *gl, *G, *gamma, *e, *beta;
};

// One forward step over the rows `at` of value head hv, V tile v0..: with kOutputs, the outputs
// of those rows into o; always the state, S <- S' (ends with a barrier). `a` must hold zeros
// above its diagonal blocks. `in` has q, k, v, g, beta (ForwardArgs or BackwardArgs).
template <typename T, bool kOutputs, class Exec, class In>
GDN_HD void forward_step(const Exec& ex, const Dims& d, const In& in, int64_t hv, int64_t v0,
                         const StepRows& at, const StepTiles<T>& m, T* o) {
  using A = acc_t<T>;
  using Path = typename cuda::GemmPath<T>::type;
  const int64_t h = hv / d.G;
  const int C = int(d.C), K = int(d.K), VT = int(d.vt);
  A *S = m.S, *kkg = m.kkg, *p = m.p, *a = m.a, *tinv = m.tinv, *y = m.y, *og = m.og, *vn = m.vn;
  A *G = m.G, *gamma = m.gamma, *e = m.e, *beta = m.beta;
  const T* kq = m.kq;
  GDN_EACH_THREAD(ex, tid) {
    load_keys(tid, ex.threads, d, in.q, in.k, h, at, m.kq);
    load_value_tile(tid, ex.threads, d, in.v, hv, at, v0, y);
    load_gates(tid, ex.threads, d, in.g, in.beta, hv, at, m.gl, beta);
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
    const int64_t rows = at.rows;
    cuda::block_gemm<A>(
        Path{}, ex, C, VT, C, [=](int i, int l) { return p[i * C + l]; },
        [=](int l, int j) { return vn[l * VT + j]; },
        [=](int i, int j, A acc) {
          if (i < rows) o[d.vo(at.tok + i, hv) + v0 + j] = from_acc<T>(og[i * VT + j] + acc);
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

}  // namespace gdn::gdr::fused
