// Chunk steps shared by the CPU fused and ssd gated delta rule (gdr_fused.cpp, gdr_ssd.cpp),
// which walk a slice chunk by chunk with the chunk tiles in per-slice scratch: ssd is the fused
// algorithm with Vn = V (no delta rule), so the steps that do not touch A, W, U are the same
// code. Tiles are row-major C x K, C x V (leading dimension ld where given), C x C; math and
// notation: docs/design.md, "The gated delta rule".
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/gdr_internal.h"

namespace gdn::gdr::detail {

// The end of a forward chunk: O = (gamma Q) S + P Vn into the chunk's len output rows (out,
// rows `stride` apart), then S' = gamma_C S + (e K)^T Vn. tmp (C x K) holds gamma Q, then e K;
// o (C x V) is scratch.
template <typename T, typename A>
void output_and_next_state(const Problem& p, const A* k, const A* qs, const A* gamma, const A* e,
                           const A* P, const A* vn, int64_t ld_vn, A* tmp, A* o, A* S, int64_t len,
                           T* out, int64_t stride) {
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V;
  for (int64_t i = 0; i < C; ++i)
    for (int64_t l = 0; l < K; ++l) tmp[i * K + l] = gamma[i] * qs[i * K + l];
  cpu::gemm(false, false, C, V, K, A(1), tmp, K, S, V, A(0), o, V);
  cpu::gemm(false, false, C, V, C, A(1), P, C, vn, ld_vn, A(1), o, V);
  store_rows(o, V, len, V, A(1), out, stride);
  const A gamma_c = gamma[C - 1];
  for (int64_t l = 0; l < KV; ++l) S[l] *= gamma_c;
  for (int64_t i = 0; i < C; ++i)
    for (int64_t l = 0; l < K; ++l) tmp[i * K + l] = e[i] * k[i * K + l];
  cpu::gemm(true, false, K, V, C, A(1), tmp, K, vn, ld_vn, A(1), S, V);
}

// A chunk's P = (Q K^T) o Gam (C x C) and Vn (C x V, leading dimension ld_vn).
template <typename A>
struct ChunkPVn {
  const A* P;
  const A* vn;
  int64_t ld_vn;
};

// Asks the cache for `rows` rows of `bytes` bytes each, `stride` elements apart, to read (or to
// write). The walks below ask for the rows of the next chunk while this one computes: without it,
// loading a chunk's strided rows from tensors in memory and storing its outputs took 10% of the
// fused kernel's time at T = 2048.
template <bool kForWrite = false, typename T>
void prefetch_rows(const T* src, int64_t stride, int64_t rows, int64_t bytes) {
  for (int64_t i = 0; i < rows; ++i) {
    const char* row = reinterpret_cast<const char*>(src + i * stride);
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, kForWrite ? 1 : 0, 2);
  }
}

// What a forward chunk (len rows at token t0, value head hv) reads: k, q, v; and writes: o.
template <typename T>
void prefetch_forward_chunk(const Problem& p, const Inputs<T>& in, T* o, int64_t hv, int64_t t0,
                            int64_t len) {
  const int64_t h = hv / p.group(), qk_bytes = p.K * sizeof(T), vo_bytes = p.V * sizeof(T);
  prefetch_rows(in.k + qk_offset(p, t0, h), p.H * p.K, len, qk_bytes);
  prefetch_rows(in.q + qk_offset(p, t0, h), p.H * p.K, len, qk_bytes);
  prefetch_rows(in.v + vo_offset(p, t0, hv), p.HV * p.V, len, vo_bytes);
  prefetch_rows<true>(o + vo_offset(p, t0, hv), p.HV * p.V, len, vo_bytes);
}

// What the backward of chunk c of key slice kh reads: k, q, and for each value head of the group
// v, dO and its chunk-start state; and writes: dq, dk, dv.
template <typename T>
void prefetch_backward_chunk(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                             const Slice& kh, int64_t c) {
  const int64_t t0 = kh.chunk_token(p.chunk, c), len = kh.chunk_rows(p.chunk, c), h = kh.head;
  const int64_t qk_bytes = p.K * sizeof(T), vo_bytes = p.V * sizeof(T), KV = p.K * p.V;
  for (const T* x : {in.k, in.q}) prefetch_rows(x + qk_offset(p, t0, h), p.H * p.K, len, qk_bytes);
  for (T* x : {args.dq, args.dk})
    prefetch_rows<true>(x + qk_offset(p, t0, h), p.H * p.K, len, qk_bytes);
  for (int64_t hv = h * p.group(); hv < (h + 1) * p.group(); ++hv) {
    for (const T* x : {in.v, args.d_o})
      prefetch_rows(x + vo_offset(p, t0, hv), p.HV * p.V, len, vo_bytes);
    prefetch_rows<true>(args.dv + vo_offset(p, t0, hv), p.HV * p.V, len, vo_bytes);
    prefetch_rows(args.residual + kh.tile(p.HV, hv, c) * KV, 0, 1, KV * sizeof(acc_t<T>));
  }
}

// The forward of value slice s = (sequence, hv), with the tiles of w (S, kq, gamma, e, qg, o): S
// from its h0 row (or zero); chunk by chunk, the chunk-start state into the residual,
// chunk_pvn(p, in, hv, t0, len, w) loads the chunk at token t0 and forms its P and Vn, then
// output_and_next_state; its ht row = S at the end.
template <typename T, class W, class ChunkPVnOf>
void forward_walk(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                  const Slice& s, const W& w, const ChunkPVnOf& chunk_pvn) {
  using A = acc_t<T>;
  const int64_t C = p.chunk, K = p.K, V = p.V, KV = K * V, hv = s.head;
  copy_or_zero(w.S, p.has_h0 ? in.h0 + s.index * KV : nullptr, KV);
  for (int64_t c = 0; c < s.chunks; ++c) {
    const int64_t t0 = s.chunk_token(C, c), len = s.chunk_rows(C, c);
    if (c + 1 < s.chunks)
      prefetch_forward_chunk(p, in, out.o, hv, s.chunk_token(C, c + 1), s.chunk_rows(C, c + 1));
    std::memcpy(out.residual + s.tile(p.HV, hv, c) * KV, w.S, KV * sizeof(A));
    const ChunkPVn<A> x = chunk_pvn(p, in, hv, t0, len, w);
    output_and_next_state(p, w.kq, w.kq + C * K, w.gamma, w.e, x.P, x.vn, x.ld_vn, w.qg, w.o, w.S,
                          len, out.o + vo_offset(p, t0, hv), p.HV * V);
  }
  if (p.want_ht) std::memcpy(out.ht + s.index * KV, w.S, KV * sizeof(A));
}

// Loads [k; scale q] of the chunk at token t0 of key head h (len real rows, the rest zero) into
// kq (2C x K) and forms [K K^T; Q K^T] (2C x C) into kqk, or Q K^T alone (C x C) without the
// delta rule (ssd).
template <typename T, typename A>
void load_keys(const Problem& p, const Inputs<T>& in, int64_t h, int64_t t0, int64_t len,
               bool with_kk, A* kq, A* kqk) {
  const int64_t C = p.chunk, K = p.K;
  load_rows(in.k + qk_offset(p, t0, h), p.H * K, len, K, C, A(1), kq, K);
  load_rows(in.q + qk_offset(p, t0, h), p.H * K, len, K, C, A(p.scale), kq + C * K, K);
  if (with_kk) {
    cpu::gemm(false, true, 2 * C, C, K, A(1), kq, K, kq, K, A(0), kqk, C);
  } else {
    cpu::gemm(false, true, C, C, K, A(1), kq + C * K, K, kq, K, A(0), kqk, C);
  }
}

// The backward of key slice kh = (sequence n, key head h): the dS' of the group's value heads
// (w.dS, group x K x V) start from their dht rows; then chunk by chunk in reverse, the keys
// (load_keys into w.kq and kqk), and value_head(p, in, args, h, j, S, t0, len, w) adds value head
// j's part to w.dqk = [dQ; dK] (2C x K) and leaves its dS in w.dS_new (S: the chunk-start state of
// value head j in the residual); dqk is stored once per chunk (dq = scale dQ): the sum over the
// group in a fixed order. The dS' end as the dh0 rows.
template <typename T, typename A, class W, class ValueHead>
void backward_walk(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                   const Slice& kh, bool with_kk, A* kqk, const W& w, const ValueHead& value_head) {
  const int64_t C = p.chunk, K = p.K, KV = K * p.V, h = kh.head;
  const int64_t hv0 = h * p.group(), s0 = kh.n * p.HV + hv0;  // first value head, its row
  for (int64_t j = 0; j < p.group(); ++j)
    copy_or_zero(w.dS + j * KV, args.dht ? args.dht + (s0 + j) * KV : nullptr, KV);
  for (int64_t c = kh.chunks - 1; c >= 0; --c) {
    const int64_t t0 = kh.chunk_token(C, c), len = kh.chunk_rows(C, c);
    if (c > 0) prefetch_backward_chunk(p, in, args, kh, c - 1);
    load_keys(p, in, h, t0, len, with_kk, w.kq, kqk);
    std::memset(w.dqk, 0, 2 * C * K * sizeof(A));
    for (int64_t j = 0; j < p.group(); ++j) {
      const A* S = args.residual + kh.tile(p.HV, hv0 + j, c) * KV;
      value_head(p, in, args, h, j, S, t0, len, w);
      std::memcpy(w.dS + j * KV, w.dS_new,
                  KV * sizeof(A));  // dS' of chunk c - 1
    }
    store_rows(w.dqk, K, len, K, A(p.scale), args.dq + qk_offset(p, t0, h), p.H * K);
    store_rows(w.dqk + C * K, K, len, K, A(1), args.dk + qk_offset(p, t0, h), p.H * K);
  }
  if (p.has_h0) std::memcpy(args.dh0 + s0 * KV, w.dS, p.group() * KV * sizeof(A));
}

// DS = dO S^T:  dQ += diag(gamma) DS;  a_i = (gamma_i q_i) . DS_i, the first term of dG.
template <typename A>
void query_state_grad(const Problem& p, const A* d_o, const A* S, const A* qg, const A* gamma,
                      A* DS, A* a, A* dq) {
  const int64_t C = p.chunk, K = p.K, V = p.V;
  cpu::gemm(false, true, C, K, V, A(1), d_o, V, S, V, A(0), DS, K);
  for (int64_t i = 0; i < C; ++i) {
    a[i] = dot(qg + i * K, DS + i * K, K);
    for (int64_t l = 0; l < K; ++l) dq[i * K + l] += gamma[i] * DS[i * K + l];
  }
}

// dS = gamma_C dS' + (the chunk's own terms, already in dS); returns <S, dS'> (K x V each).
template <typename A>
A carry_state_grad(const Problem& p, A gamma_c, const A* S, const A* dSp, A* dS) {
  for (int64_t l = 0; l < p.K * p.V; ++l) dS[l] += gamma_c * dSp[l];
  return dot(S, dSp, p.K * p.V);
}

// dK += diag(e) Vn dS'^T  (tmp: C x K scratch).
template <typename A>
void add_state_key_grad(const Problem& p, const A* vn, int64_t ld_vn, const A* dSp, const A* e,
                        A* tmp, A* dk) {
  const int64_t C = p.chunk, K = p.K, V = p.V;
  cpu::gemm(false, true, C, K, V, A(1), vn, ld_vn, dSp, V, A(0), tmp, K);
  for (int64_t i = 0; i < C; ++i)
    for (int64_t l = 0; l < K; ++l) dk[i * K + l] += e[i] * tmp[i * K + l];
}

// dP = dO Vn^T;  X = dP o P (strictly lower; the diagonal cancels);  dPG = dP o Gam (into dpg);
// then dK += dPG^T Q (qs: scale q).
template <typename A>
void score_grads(const Problem& p, const A* d_o, const A* vn, int64_t ld_vn, const A* P,
                 const A* gam, const A* qs, A* dpg, A* X, A* dk) {
  const int64_t C = p.chunk, K = p.K, V = p.V;
  cpu::gemm(false, true, C, C, V, A(1), d_o, V, vn, ld_vn, A(0), dpg, C);
  for (int64_t i = 0; i < C; ++i) {
    for (int64_t l = 0; l < i; ++l) X[i * C + l] = dpg[i * C + l] * P[i * C + l];
    for (int64_t l = 0; l < C; ++l) dpg[i * C + l] *= gam[i * C + l];
  }
  cpu::gemm(true, false, C, K, C, A(1), dpg, C, qs, K, A(1), dk, K);
}

}  // namespace gdn::gdr::detail
