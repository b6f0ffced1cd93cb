// Shared by the CUDA chunked gated delta rule's forward (gdr_chunked.cu) and backward
// (gdr_chunked_backward.cu): batched GEMMs over chunk tiles, and the kernels that load the inputs
// and prepare every chunk. The buffers are the CPU's (kernels/gdr_workspace_layout.h:
// ChunkedLayout, ChunkedSide::cuda; the `full` residual in the same layout: states, then A, then
// [W | U]), every one [slice][NT][chunk tile]: value slices (b, hv) unless noted as key slices
// (b, h); a last partial chunk is padded with q = k = v = 0, g = 0, beta = 0 (exact, see
// kernels/cpu/gdr_internal.h).
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "kernels/cuda/gdr_common.cuh"
#include "kernels/cuda/gemm.h"

namespace gdn::gdr::cuda_detail {

// One operand of a batched GEMM over chunk tiles: tile n is at base + n * stride, n the value tile
// index, or for `key` operands the key tile of the same (key slice, chunk).
template <typename A>
struct Op {
  const A* base;
  int64_t ld, stride;
  bool key = false;
};

// C_i = alpha op(A_i) op(B_i) + beta C_i for every value tile i (launch_math.h: chunk_batches).
template <typename A>
void batched(const Dims& d, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
             Op<A> a, Op<A> b, double beta, A* c, int64_t ldc, int64_t stride_c,
             cudaStream_t stream) {
  const std::vector<ChunkBatch> batches =
      (a.key || b.key) ? chunk_batches(d.B * d.H, d.G, d.NT)
                       : std::vector<ChunkBatch>{{0, 1, 0, 1, d.B * d.HV * d.NT}};
  for (const ChunkBatch& cb : batches) {
    auto first = [&](const Op<A>& o) {
      return o.base + (o.key ? cb.key_first : cb.value_first) * o.stride;
    };
    auto step = [&](const Op<A>& o) { return (o.key ? cb.key_step : cb.value_step) * o.stride; };
    gemm_strided_batched<A>(ta, tb, M, N, K, alpha, first(a), a.ld, step(a), first(b), b.ld,
                            step(b), beta, c + cb.value_first * stride_c, ldc,
                            cb.value_step * stride_c, cb.count, stream);
  }
}

// The same GEMM for chunk c of every value slice (tile s * NT + c): the inter-chunk recurrence.
template <typename A>
void at_chunk(const Dims& d, int64_t c, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
              double alpha, Op<A> a, Op<A> b, double beta, A* out, int64_t ldc, int64_t stride_c,
              cudaStream_t stream) {
  gemm_strided_batched<A>(ta, tb, M, N, K, alpha, a.base + c * a.stride, a.ld, d.NT * a.stride,
                          b.base + c * b.stride, b.ld, d.NT * b.stride, beta, out + c * stride_c,
                          ldc, d.NT * stride_c, d.B * d.HV, stream);
}

namespace {

constexpr int kThreads = 256;
constexpr int kMaxC = 64;

// kq[key tile] = [k; scale q], padded.
template <typename T, typename A>
__global__ void load_keys_kernel(Dims d, const T* q, const T* k, A* kq) {
  const int64_t C = d.C, K = d.K;
  GDN_GRID_LOOP(e, d.B * d.H * d.NT * C * K) {
    const int64_t i = e / (C * K), r = (e / K) % C, l = e % K;
    const int64_t ks = i / d.NT, t = (i % d.NT) * C + r, off = d.qk(ks / d.H, t, ks % d.H) + l;
    A* dst = kq + i * 2 * C * K + r * K + l;
    dst[0] = t < d.T ? to_acc(k[off]) : A(0);
    dst[C * K] = t < d.T ? A(d.scale) * to_acc(q[off]) : A(0);
  }
}

// Element e of the value tiles [slice][NT][C x V]: whether its row is a real step (not padding),
// and its offset in a [B, T, HV, V] tensor (v, dO, o) when it is.
struct ValueElem {
  bool real;
  int64_t at;
};
__device__ __forceinline__ ValueElem value_elem(const Dims& d, int64_t e) {
  const int64_t i = e / (d.C * d.V), r = (e / d.V) % d.C, l = e % d.V;
  const int64_t s = i / d.NT, t = (i % d.NT) * d.C + r;
  return ValueElem{t < d.T, d.vo(s / d.HV, t, s % d.HV) + l};
}

// dst[value tile] = rows of a [B, T, HV, V] tensor (v or dO), padded.
template <typename T, typename A>
__global__ void load_values_kernel(Dims d, const T* src, A* dst) {
  GDN_GRID_LOOP(e, d.B * d.HV * d.NT * d.C * d.V) {
    const ValueElem x = value_elem(d, e);
    dst[e] = x.real ? to_acc(src[x.at]) : A(0);
  }
}

// Per value chunk: G = in-chunk cumsum of g, gamma = exp(G), e = exp(G_C - G) (exponents <= 0).
template <typename T, typename A>
__global__ void load_gates_kernel(Dims d, const T* g, const T* beta, A* G, A* gamma, A* e,
                                  A* beta_out) {
  const int64_t C = d.C;
  GDN_GRID_LOOP(i, d.B * d.HV * d.NT) {
    const int64_t s = i / d.NT, t0 = (i % d.NT) * C, go = d.gate(s / d.HV, t0, s % d.HV);
    A acc = 0;
    for (int64_t r = 0; r < C; ++r) {
      const bool real = t0 + r < d.T;
      if (real) acc += to_acc(g[go + r * d.HV]);
      G[i * C + r] = acc;
      gamma[i * C + r] = acc_exp(acc);
      beta_out[i * C + r] = real ? to_acc(beta[go + r * d.HV]) : A(0);
    }
    for (int64_t r = 0; r < C; ++r) e[i * C + r] = acc_exp(G[i * C + C - 1] - G[i * C + r]);
  }
}

// Block per value chunk: Gam (into gam when given), P = QK o Gam, X = [beta gamma K | beta V],
// gamma Q, e K, and unless have_a, M_ij = beta_i (k_i . k_j) Gam_ij (i > j) and A = (I + M)^-1 by
// forward substitution: column l of A depends only on column l, so thread l computes it
// (kernel_math.h: unit_lower_inverse_column), in place in the shared tile.
template <typename A>
__global__ void __launch_bounds__(kThreads)
    prepare_kernel(Dims d, ChunkedLayout<A> w, bool have_a, A* gam) {
  constexpr int ld = kMaxC + 1;  // padded rows: no bank conflicts down a column
  __shared__ A m[kMaxC * ld];
  const int64_t C = d.C, K = d.K, V = d.V, KpV = K + V;
  const int64_t i = blockIdx.x, s = i / d.NT, ki = d.key_slice(s) * d.NT + i % d.NT;
  const A *k = w.kq + ki * 2 * C * K, *qs = k + C * K, *KK = w.kqk + ki * 2 * C * C;
  const A *QK = KK + C * C, *G = w.G + i * C, *gamma = w.gamma + i * C, *e = w.e + i * C;
  const A* beta = w.beta + i * C;
  A* xw = w.x + i * C * KpV;
  for (int64_t x = threadIdx.x; x < C * C; x += blockDim.x) {
    const int64_t r = x / C, l = x % C;
    const A gm = l <= r ? acc_exp(G[r] - G[l]) : A(0);
    if (gam) gam[i * C * C + x] = gm;
    if (!have_a) m[r * ld + l] = l < r ? beta[r] * KK[x] * gm : A(0);
    w.p[i * C * C + x] = QK[x] * gm;
  }
  for (int64_t x = threadIdx.x; x < C * K; x += blockDim.x) {
    const int64_t r = x / K, l = x % K;
    xw[r * KpV + l] = beta[r] * gamma[r] * k[x];
    w.qg[i * C * K + x] = gamma[r] * qs[x];
    w.ke[i * C * K + x] = e[r] * k[x];
  }
  for (int64_t x = threadIdx.x; x < C * V; x += blockDim.x) {
    const int64_t r = x / V, l = x % V;
    xw[r * KpV + K + l] = beta[r] * w.v[i * C * V + x];
  }
  if (have_a) return;
  __syncthreads();
  if (threadIdx.x < C) unit_lower_inverse_column(int(threadIdx.x), int(C), m, ld);
  __syncthreads();
  for (int64_t x = threadIdx.x; x < C * C; x += blockDim.x) {
    const int64_t r = x / C, l = x % C;
    w.a[i * C * C + x] = r > l ? m[l * ld + r] : (r == l ? A(1) : A(0));
  }
}

// dst tile rows = the U columns of [W | U] (Vn starts as U).
template <typename A>
__global__ void copy_u_kernel(Dims d, const A* wu, A* vn) {
  const int64_t V = d.V, KpV = d.K + d.V;
  GDN_GRID_LOOP(e, d.B * d.HV * d.NT * d.C * V) {
    vn[e] = wu[(e / V) * KpV + d.K + e % V];
  }
}

// Loads q, k (key tiles), v, gates (value tiles) of every chunk; [KK; QK] = [k; q] k^T.
template <typename T, typename A>
void load_all(const Dims& d, const Inputs<T>& in, const ChunkedLayout<A>& w, cudaStream_t s) {
  const int64_t C = d.C, K = d.K, nk = d.B * d.H * d.NT, nv = d.B * d.HV * d.NT;
  load_keys_kernel<T, A><<<grid_1d(nk * C * K, kThreads), kThreads, 0, s>>>(d, in.q, in.k, w.kq);
  GDN_KCUDA_LAUNCHED("gdr chunked load keys");
  load_values_kernel<T, A><<<grid_1d(nv * C * d.V, kThreads), kThreads, 0, s>>>(d, in.v, w.v);
  GDN_KCUDA_LAUNCHED("gdr chunked load values");
  load_gates_kernel<T, A>
      <<<grid_1d(nv, kThreads), kThreads, 0, s>>>(d, in.g, in.beta, w.G, w.gamma, w.e, w.beta);
  GDN_KCUDA_LAUNCHED("gdr chunked load gates");
  gemm_strided_batched<A>(false, true, 2 * C, C, K, 1.0, w.kq, K, 2 * C * K, w.kq, K, 2 * C * K,
                          0.0, w.kqk, C, 2 * C * C, nk, s);
}

// Every chunk's P, X, gamma Q, e K (and Gam into gam when given); A and [W | U] = A X unless
// have_a (the `full` residual holds them).
template <typename A>
void prepare_chunks(const Dims& d, const ChunkedLayout<A>& w, bool have_a, A* gam, cudaStream_t s) {
  const int64_t C = d.C, KpV = d.K + d.V, nv = d.B * d.HV * d.NT;
  prepare_kernel<A><<<unsigned(nv), kThreads, 0, s>>>(d, w, have_a, gam);
  GDN_KCUDA_LAUNCHED("gdr chunked prepare");
  if (!have_a)
    gemm_strided_batched<A>(false, false, C, KpV, C, 1.0, w.a, C, C * C, w.x, KpV, C * KpV, 0.0,
                            w.wu, KpV, C * KpV, nv, s);
}

// Vn = U for every chunk (the GEMM - W S follows).
template <typename A>
void copy_u(const Dims& d, const ChunkedLayout<A>& w, cudaStream_t s) {
  copy_u_kernel<A>
      <<<grid_1d(d.B * d.HV * d.NT * d.C * d.V, kThreads), kThreads, 0, s>>>(d, w.wu, w.vn);
  GDN_KCUDA_LAUNCHED("gdr chunked copy U");
}

}  // namespace

}  // namespace gdn::gdr::cuda_detail
