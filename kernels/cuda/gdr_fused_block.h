// The fused gated delta rule, one thread block's work: (sequence n, value head hv, V tile of vt
// columns), every chunk of the sequence in turn (or every sub-chunk, where the plan splits the
// chunk: the backward then recomputes the states inside a chunk from the residual's, load_state),
// with the state tile and all chunk-local matrices in shared memory (layouts: gdr_fused_plan.h).
// Written once for the GPU (gdr_fused.cu) and the CPU emulator (block_exec.h;
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
// dg_t = sum_{i >= t} dG_i is summed as the CPU kernels sum it (kernel_math.h: gate_grad_at),
// with s in X's last row: sum(s) - sum_{i >= t} s_i is never formed, since under strong decay it
// cancels to far less than fp32 rounding of sum(s) (docs/design.md, the gate gradient).
// Everything but dV and dh0 (per tile) is a sum over the V tiles (and dq, dk over the value heads
// of a group) of what each block computes from its columns: the blocks of a group add their parts
// to one running sum per chunk in a fixed order, handing it on through a flag, and the last one
// writes the gradient (BackwardWorkspace, gdr_fused_plan.h): deterministic, and one copy of the
// sums in memory however many tiles there are.
// Q is stored scaled (scale q), so dq = scale dQ.
#pragma once
#include <cstdint>

#include "kernels/cuda/gdr_fused_step.h"

namespace gdn::gdr::fused {

// ---- forward ----------------------------------------------------------------------------------

// One forward block: its V tile of slice s = (sequence n, hv), the sequence's chunks in turn from
// its h0 (or zero), the chunk-start states into the residual, its ht at the end.
template <typename T, class Exec>
GDN_HD void forward_block(const Exec& ex, const Dims& d, const ForwardArgs<T>& args, acc_t<T>* sm,
                          int64_t block) {
  using A = acc_t<T>;
  const ForwardLayout L(d.C, d.K, d.vt, sizeof(T));
  const int64_t s = block / d.NVT, hv = s % d.HV;
  const cuda_seqs::SeqSpan seq = d.seq(s / d.HV);
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
  const int64_t steps = d.steps(seq);
  for (int64_t c = 0; c < steps; ++c) {
    // the residual: the state at the start of every R-th step (the Problem's chunks)
    if (args.residual && c % d.R == 0) {
      GDN_EACH_THREAD(ex, tid) {
        A* r = args.residual + d.state_at(seq, hv, c) + v0;
        for (int x = tid; x < K * VT; x += ex.threads) r[(x / VT) * d.V + x % VT] = S[x];
      }
    }
    forward_step<T, true>(ex, d, args, hv, v0, step_rows(d, seq, c), m, args.o);
  }
  if (args.ht) {
    GDN_EACH_THREAD(ex, tid) {
      for (int x = tid; x < K * VT; x += ex.threads)
        args.ht[(s * d.K + x / VT) * d.V + v0 + x % VT] = S[x];
    }
  }
}

// ---- backward ---------------------------------------------------------------------------------

// The state of value head hv at the start of step c (its first token tok; V tile v0..) from the
// residual, which holds it at every R-th step (state0: the offset of the sequence's first state
// of hv, Dims::state_at): the saved state, then c % R forward steps (the backward's recompute;
// ends with a barrier when it runs any). Those steps precede step c, so none is the sequence's
// last: each has C rows. A step reads S only after its loads and two barriers, so the load of S
// needs no barrier of its own.
template <typename T, class Exec>
GDN_HD void load_state(const Exec& ex, const Dims& d, const BackwardArgs<T>& args, int64_t state0,
                       int64_t hv, int64_t v0, int64_t c, int64_t tok, const StepTiles<T>& m) {
  using A = acc_t<T>;
  const int VT = int(d.vt);
  GDN_EACH_THREAD(ex, tid) {
    const A* r = args.residual + state0 + (c / d.R) * d.K * d.V + v0;
    for (int x = tid; x < int(d.K) * VT; x += ex.threads) m.S[x] = r[(x / VT) * d.V + x % VT];
  }
  for (int64_t step = c - c % d.R; step < c; ++step)
    forward_step<T, false>(ex, d, args, hv, v0, StepRows{tok - (c - step) * d.C, d.C}, m, nullptr);
}

// The backward block's shared tiles (BackwardLayout) and the forward-step view of them that the
// recompute uses (the inversion's block row in dpg, Y in yr).
template <typename T>
struct BackwardTiles {
  using A = acc_t<T>;
  A *S, *dS, *kkg, *p, *a, *dpg, *xg, *da, *yr, *ksg, *qd, *dO, *kd, *vn;
  A *gl, *G, *gamma, *e, *beta, *avec, *svec, *zy, *zk, *red, *consts;
  T* kq;  // [k; scale q]
  GDN_HD BackwardTiles(const BackwardLayout& L, A* sm)
      : S(sm + L.S),
        dS(sm + L.dS),
        kkg(sm + L.kkg),
        p(sm + L.p),
        a(sm + L.a),
        dpg(sm + L.dpg),
        xg(sm + L.xg),
        da(sm + L.da),
        yr(sm + L.yr),
        ksg(sm + L.ksg),
        qd(sm + L.qd),
        dO(sm + L.dO),
        kd(sm + L.kd),
        vn(sm + L.vn),
        gl(sm + L.gl),
        G(sm + L.G),
        gamma(sm + L.gamma),
        e(sm + L.e),
        beta(sm + L.beta),
        avec(sm + L.avec),
        svec(sm + L.svec),
        zy(sm + L.zy),
        zk(sm + L.zk),
        red(sm + L.red),
        consts(sm + L.consts),
        kq(reinterpret_cast<T*>(sm + L.kq)) {}
  GDN_HD StepTiles<T> steps() const {
    return StepTiles<T>{S, kq, kkg, nullptr, a, dpg, yr, nullptr, vn, gl, G, gamma, e, beta};
  }
};

// Where a backward block is at: value head hv of key head h, V tile at v0, and the chunk (kernel
// step) c of its sequence, rows tokens from token tok; state0 the offset of the sequence's first
// residual state of hv (the sequence itself is not kept: registers).
struct ChunkPlace {
  int64_t hv, h, v0, c, tok, rows, state0;
  GDN_HD StepRows step() const { return StepRows{tok, rows}; }
};

// Loads chunk c: S (load_state), [k; scale q], v (into yr), dO, the gates; then G, gamma, e and
// every thread's part of <S, dS'> (in red).
template <typename T, class Exec>
GDN_HD void backward_load(const Exec& ex, const Dims& d, const BackwardArgs<T>& args,
                          const BackwardTiles<T>& m, const ChunkPlace& at) {
  using A = acc_t<T>;
  const int C = int(d.C), K = int(d.K), VT = int(d.vt);
  load_state<T>(ex, d, args, at.state0, at.hv, at.v0, at.c, at.tok, m.steps());
  GDN_EACH_THREAD(ex, tid) {
    load_keys(tid, ex.threads, d, args.q, args.k, at.h, at.step(), m.kq);
    load_value_tile(tid, ex.threads, d, args.v, at.hv, at.step(), at.v0, m.yr);
    load_value_tile(tid, ex.threads, d, args.d_o, at.hv, at.step(), at.v0, m.dO);
    load_gates(tid, ex.threads, d, args.g, args.beta, at.hv, at.step(), m.gl, m.beta);
  }
  ex.sync();
  const A *S = m.S, *dS = m.dS;
  GDN_EACH_THREAD(ex, tid) {
    chunk_gates(tid, C, m.gl, m.G, m.gamma, m.e);
    A acc = 0;  // this thread's part of <S, dS'>
    for (int x = tid; x < K * VT; x += ex.threads) acc += S[x] * dS[x];
    m.red[tid] = acc;
  }
  ex.sync();
}

// KK o Gam, P (key_products); [k; q] S -> gamma K S, Yr = v - gamma K S (over v), gamma Q S o dO;
// K dS';  consts[0] = gamma_C <S, dS'>.
template <typename T, class Exec>
GDN_HD void state_products(const Exec& ex, const Dims& d, const BackwardTiles<T>& m) {
  using A = acc_t<T>;
  using Path = typename cuda::GemmPath<T>::type;
  const int C = int(d.C), K = int(d.K), VT = int(d.vt);
  const A *S = m.S, *dS = m.dS, *gamma = m.gamma, *dO = m.dO, *red = m.red;
  A *ksg = m.ksg, *yr = m.yr, *qd = m.qd, *kd = m.kd, *consts = m.consts;
  const T* kq = m.kq;
  key_products<A, Path>(ex, C, K, kq, m.G, m.kkg, m.p);
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
}

// A = (I + M)^-1, M = diag(beta) (KK o Gam), its block row through dpg (free here);
// Vn = A diag(beta) Yr;  avec = rowsum(gamma Q S o dO).
template <typename T, class Exec>
GDN_HD void recompute_vn(const Exec& ex, const Dims& d, const BackwardTiles<T>& m) {
  using A = acc_t<T>;
  using Path = typename cuda::GemmPath<T>::type;
  const int C = int(d.C), VT = int(d.vt);
  const A *kkg = m.kkg, *beta = m.beta, *yr = m.yr, *qd = m.qd;
  A *a = m.a, *vn = m.vn, *avec = m.avec;
  invert_unit_lower(
      ex, C, [=](int i, int j) { return beta[i] * kkg[i * C + j]; }, a, m.dpg);
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
}

// dVn = P^T dO + diag(e) K dS' (over qd);  dP = dO Vn^T -> dP o Gam (dpg), X = dP o P (xg);
// s = e o rowsum(K dS' o Vn) (svec).
template <typename T, class Exec>
GDN_HD void value_grads(const Exec& ex, const Dims& d, const BackwardTiles<T>& m) {
  using A = acc_t<T>;
  using Path = typename cuda::GemmPath<T>::type;
  const int C = int(d.C), VT = int(d.vt);
  const A *p = m.p, *dO = m.dO, *e = m.e, *kd = m.kd, *vn = m.vn, *G = m.G;
  A *qd = m.qd, *dpg = m.dpg, *xg = m.xg, *svec = m.svec;
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
}

// Z = A^T dVn (over kd);  dA = dVn Y^T;  then, once the group's earlier blocks have added chunk
// c, dQ = (dP o Gam) K + diag(gamma) dO S^T (this block's part, into the running sum).
template <typename T, class Exec>
GDN_HD void query_grads(const Exec& ex, const Dims& d, const BackwardArgs<T>& args,
                        const BackwardTiles<T>& m, const SumChain<acc_t<T>>& chain,
                        const ChunkPlace& at) {
  using A = acc_t<T>;
  using Path = typename cuda::GemmPath<T>::type;
  const int C = int(d.C), K = int(d.K), VT = int(d.vt);
  const A *a = m.a, *qd = m.qd, *beta = m.beta, *yr = m.yr, *dpg = m.dpg, *gamma = m.gamma;
  const A *dO = m.dO, *S = m.S;
  A *kd = m.kd, *da = m.da;
  const T* kq = m.kq;
  const int64_t h = at.h, tok = at.tok, rows = at.rows;
  cuda::block_gemm<A>(
      Path{}, ex, C, VT, C, [=](int i, int l) { return a[l * C + i]; },
      [=](int l, int j) { return qd[l * VT + j]; },
      [=](int i, int j, A acc) { kd[i * VT + j] = acc; }, LowerAT{C});
  cuda::block_gemm<A>(
      Path{}, ex, C, C, VT, [=](int i, int l) { return qd[i * VT + l]; },
      [=](int l, int j) { return beta[j] * yr[j * VT + l]; },
      [=](int i, int j, A acc) { da[i * C + j] = acc; });
  ex.wait_for(chain.flags + at.c, chain.order);
  cuda::block_gemm<A>(
      Path{}, ex, C, K, C + VT,
      [=](int i, int l) { return l < C ? dpg[i * C + l] : gamma[i] * dO[i * VT + l - C]; },
      [=](int l, int j) { return l < C ? A(kq[l * K + j]) : S[j * VT + l - C]; },
      [=](int i, int j, A acc) {
        if (i < rows)
          chain.add(chain.dq, args.dq, d.qk(tok + i, h) + j, acc, chain.order == 0,
                    chain.order == chain.last, A(d.scale));
      });
  ex.sync();
}

// T1 = dA A^T (over p);  dV = diag(beta) Z (to dv);  zy = rowsum(Z o Yr), avec -= beta zk;
// then dM = strictly_lower(-A^T T1) (over da), X += dM o M, and s joins X's last row.
template <typename T, class Exec>
GDN_HD void decay_grads(const Exec& ex, const Dims& d, const BackwardArgs<T>& args,
                        const BackwardTiles<T>& m, const ChunkPlace& at) {
  using A = acc_t<T>;
  using Path = typename cuda::GemmPath<T>::type;
  const int C = int(d.C), VT = int(d.vt);
  const A *a = m.a, *beta = m.beta, *kd = m.kd, *yr = m.yr, *ksg = m.ksg, *svec = m.svec;
  const A* kkg = m.kkg;
  A *p = m.p, *da = m.da, *xg = m.xg, *avec = m.avec, *zy = m.zy, *zk = m.zk;
  cuda::block_gemm<A>(
      Path{}, ex, C, C, C, [=](int i, int l) { return da[i * C + l]; },
      [=](int l, int j) { return a[j * C + l]; }, [=](int i, int j, A acc) { p[i * C + j] = acc; },
      LowerBT{});
  GDN_EACH_THREAD(ex, tid) {
    for (int x = tid; x < C * VT; x += ex.threads) {
      const int i = x / VT;
      if (i < at.rows)
        args.dv[d.vo(at.tok + i, at.hv) + at.v0 + x % VT] = from_acc<T>(beta[i] * kd[x]);
    }
    if (tid < C) {
      A acc_y = 0, acc_k = 0;
      for (int j = 0; j < VT; ++j) {
        acc_y += kd[tid * VT + j] * yr[tid * VT + j];
        acc_k += kd[tid * VT + j] * ksg[tid * VT + j];
      }
      zy[tid] = acc_y;
      zk[tid] = acc_k;
      avec[tid] = avec[tid] - beta[tid] * acc_k;
    }
  }
  ex.sync();
  cuda::block_gemm<A>(
      Path{}, ex, C, C, C, [=](int i, int l) { return a[l * C + i]; },
      [=](int l, int j) { return p[l * C + j]; },
      [=](int i, int j, A acc) {
        const A dm = j < i ? -acc : A(0);
        da[i * C + j] = dm;
        A x = xg[i * C + j] + dm * beta[i] * kkg[i * C + j];
        if (i == C - 1 && j < i) x += svec[j];  // the e_j terms, as the CPU's X
        xg[i * C + j] = x;
      },
      [=](int i_lo, int i_hi, int j_lo, int) {  // A^T: l >= i; only below the diagonal
        return j_lo >= i_hi ? KSpan{0, 0} : KSpan{i_lo, C};
      });
  ex.sync();
}

// Bsym = Bm + Bm^T (over p);  dbeta = rowsum(Z o Yr) + rowsum(dM o KK o Gam) and dg (into the
// running sums over the V tiles).
template <typename T, class Exec>
GDN_HD void gate_grads(const Exec& ex, const Dims& d, const BackwardArgs<T>& args,
                       const BackwardTiles<T>& m, const SumChain<acc_t<T>>& chain,
                       const ChunkPlace& at) {
  using A = acc_t<T>;
  const int C = int(d.C);
  const A *beta = m.beta, *da = m.da, *G = m.G, *kkg = m.kkg, *zy = m.zy, *avec = m.avec;
  const A *xg = m.xg, *consts = m.consts;
  A* p = m.p;
  GDN_EACH_THREAD(ex, tid) {
    for (int x = tid; x < C * C; x += ex.threads) {
      const int i = x / C, j = x % C;
      A v = 0;
      if (j < i) v = beta[i] * da[x] * hd_exp(G[i] - G[j]);
      if (i < j) v = beta[j] * da[j * C + i] * hd_exp(G[j] - G[i]);
      p[x] = v;
    }
    if (tid < at.rows) {
      A acc = 0;
      for (int j = 0; j < tid; ++j) acc += da[tid * C + j] * kkg[tid * C + j];
      const int64_t g_at = d.gate(at.tok + tid, at.hv);
      chain.add(chain.dbeta, args.dbeta, g_at, zy[tid] + acc, chain.first_tile, chain.last_tile);
      chain.add(chain.dg, args.dg, g_at, cuda::gate_grad_at(tid, avec, xg, consts[0], C),
                chain.first_tile, chain.last_tile);
    }
  }
  ex.sync();
}

// dK = (dP o Gam)^T Q + Bsym K + diag(e) Vn dS'^T - diag(beta gamma) Z S^T (this block's part,
// into the running sum); then chunk c is handed to the group's next block.
template <typename T, class Exec>
GDN_HD void key_grads(const Exec& ex, const Dims& d, const BackwardArgs<T>& args,
                      const BackwardTiles<T>& m, const SumChain<acc_t<T>>& chain,
                      const ChunkPlace& at) {
  using A = acc_t<T>;
  using Path = typename cuda::GemmPath<T>::type;
  const int C = int(d.C), K = int(d.K), VT = int(d.vt);
  const A *dpg = m.dpg, *p = m.p, *e = m.e, *vn = m.vn, *beta = m.beta, *gamma = m.gamma;
  const A *kd = m.kd, *dS = m.dS, *S = m.S;
  const T *kq = m.kq, *qs = m.kq + C * K;  // scale q
  const int64_t h = at.h, tok = at.tok, rows = at.rows;
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
          chain.add(chain.dk, args.dk, d.qk(tok + i, h) + j, acc, chain.order == 0,
                    chain.order == chain.last);
      });
  ex.release(chain.flags + at.c, chain.order + 1);  // a barrier too
}

// dS = gamma_C dS' + (diag(gamma) Q)^T dO - K^T diag(beta gamma) Z: dS' of the chunk before.
template <typename T, class Exec>
GDN_HD void state_grad(const Exec& ex, const Dims& d, const BackwardTiles<T>& m) {
  using A = acc_t<T>;
  using Path = typename cuda::GemmPath<T>::type;
  const int C = int(d.C), K = int(d.K), VT = int(d.vt);
  const A *gamma = m.gamma, *dO = m.dO, *beta = m.beta, *kd = m.kd;
  A* dS = m.dS;
  const T *kq = m.kq, *qs = m.kq + C * K;  // scale q
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

// One backward block, its place by ticket: its sequence's chunks in reverse, each through the
// steps above; dh0 of its V tile at the end.
template <typename T, class Exec>
GDN_HD void backward_block(const Exec& ex, const Dims& d, const BackwardArgs<T>& args,
                           acc_t<T>* sm) {
  using A = acc_t<T>;
  const BackwardLayout L(d.C, d.K, d.vt, ex.threads, sizeof(T));
  const BackwardWorkspace W(d, sizeof(A));
  A* ws = args.workspace;
  int* flags = reinterpret_cast<int*>(ws + W.flags);
  // The ticket orders the blocks of a group (consecutive tickets) as their running sums need.
  const int64_t block = ex.claim_ticket(flags + W.counter, reinterpret_cast<int*>(sm + L.ticket));
  const int64_t s = block / d.NVT, hv = s % d.HV, h = hv / d.G;
  const int64_t tile = block % d.NVT, v0 = tile * d.vt;
  const cuda_seqs::SeqSpan seq = d.seq(s / d.HV);
  const SumChain<A> chain{ws + W.dq,
                          ws + W.dk,
                          ws + W.dg,
                          ws + W.dbeta,
                          flags + d.flags_at(seq, h),
                          int((hv % d.G) * d.NVT + tile),
                          int(d.G * d.NVT - 1),
                          tile == 0,
                          tile == d.NVT - 1};
  const int C = int(d.C), K = int(d.K), VT = int(d.vt);
  A *dS = sm + L.dS, *a = sm + L.a;
  // each step forms its view of the tiles: one held across the chunk loop costs registers
  const auto tiles = [&] { return BackwardTiles<T>(L, sm); };

  GDN_EACH_THREAD(ex, tid) {
    for (int x = tid; x < K * VT; x += ex.threads)
      dS[x] = args.dht ? args.dht[(s * d.K + x / VT) * d.V + v0 + x % VT] : A(0);
    for (int x = tid; x < C * C; x += ex.threads) a[x] = 0;
  }
  ex.sync();
  const int64_t state0 = d.state_at(seq, hv, 0);
  for (int64_t c = d.steps(seq) - 1; c >= 0; --c) {
    const StepRows rows = step_rows(d, seq, c);
    const ChunkPlace at{hv, h, v0, c, rows.tok, rows.rows, state0};
    backward_load(ex, d, args, tiles(), at);
    state_products(ex, d, tiles());
    recompute_vn(ex, d, tiles());
    value_grads(ex, d, tiles());
    query_grads(ex, d, args, tiles(), chain, at);
    decay_grads(ex, d, args, tiles(), at);
    gate_grads(ex, d, args, tiles(), chain, at);
    key_grads(ex, d, args, tiles(), chain, at);
    state_grad(ex, d, tiles());
  }
  if (args.dh0) {
    GDN_EACH_THREAD(ex, tid) {
      for (int x = tid; x < K * VT; x += ex.threads)
        args.dh0[(s * d.K + x / VT) * d.V + v0 + x % VT] = dS[x];
    }
  }
}

}  // namespace gdn::gdr::fused
