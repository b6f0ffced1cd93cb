// The chunked (WY/UT) Kimi Delta Attention on CUDA: the CPU's kernels/cpu/kda_chunked.cpp (its
// header and docs/design.md 4.11 give the math) with one block per slice, chunk after chunk, every
// product a block-wide loop in the accumulator type. A bounded grid of blocks takes the (sequence,
// value head) slices (forward) or (sequence, key head) slices (backward, the group's value heads in
// order) in turn, each with its chunk buffers in its part of the workspace. The gated forms use the
// same sub-chunks of 16 rows with exponents relative to each sub-chunk's first row, so every
// exponent is <= 0. No atomics: the same inputs give the same bits. The residual is the state at
// every chunk start, as the recurrent kernels keep it.
#include <cuda_runtime.h>

#include "kernels/cuda/kda_common.cuh"
#include "kernels/gdr_workspace_layout.h"
#include "kernels/kda_chunk_layout.h"

namespace gdn::kda::cuda_detail {

namespace {

using ::gdn::cuda::acc_exp;
using ::gdn::cuda::as_stream;

constexpr int kThreads = 256;
constexpr int64_t kSub = 16;         // rows of a sub-chunk
constexpr int64_t kMaxBlocks = 128;  // blocks of a launch (each with its chunk buffers)

// One block's chunk buffers (C rows), carved as on the CPU (kernels/kda_chunk_layout.h) with its
// own gated-form scratch between them; `T` the longest sequence (backward).
template <typename A>
struct Scratch : detail::ChunkBuffers<A> {
  A *xr, *ei, *yr, *ej, *tmp, *tx, *ty;
  int64_t used = 0;

  __host__ __device__ Scratch(int64_t C, int64_t K, int64_t V, int64_t T, A* base, bool backward) {
    gdr::detail::Carver<A*> c(base);
    this->carve_forward(c, C, K, V);
    c.take_each(kSub * K, xr, ei);
    c.take_each(C * K, yr, ej, tmp, tx, ty);
    if (backward) this->carve_backward(c, C, K, V, T);
    used = c.used();
  }
};

int64_t scratch_elems(const Problem& p, bool backward) {
  return Scratch<float>(p.chunk, p.K, p.V, longest_sequence(p), nullptr, backward).used;
}
int64_t blocks(const Problem& p, bool backward) {
  return std::min(p.num_seqs() * (backward ? p.H : p.HV), kMaxBlocks);
}

// F_ij = sum_c X_ic Y_jc exp(G_ic - G_jc) for j < i (j <= i when `diag`), else 0.
template <typename A>
__device__ void gated_form(const A* X, const A* Y, const A* G, int64_t C, int64_t K, bool diag,
                           A* F, const Scratch<A>& w) {
  for (int64_t x = threadIdx.x; x < C * C; x += blockDim.x) F[x] = 0;
  __syncthreads();
  for (int64_t x = threadIdx.x; x < C * kSub; x += blockDim.x) {
    const int64_t i = x / kSub, j = i / kSub * kSub + x % kSub;
    if (j > i || (j == i && !diag)) continue;
    A s = 0;
    for (int64_t c = 0; c < K; ++c)
      s += X[i * K + c] * Y[j * K + c] * acc_exp(G[i * K + c] - G[j * K + c]);
    F[i * C + j] = s;
  }
  __syncthreads();
  for (int64_t r = kSub; r < C; r += kSub) {
    const A* Gr = G + r * K;
    for (int64_t x = threadIdx.x; x < kSub * K; x += blockDim.x)
      w.xr[x] = X[r * K + x] * acc_exp(G[r * K + x] - Gr[x % K]);
    for (int64_t x = threadIdx.x; x < r * K; x += blockDim.x)
      w.yr[x] = Y[x] * acc_exp(Gr[x % K] - G[x]);
    __syncthreads();
    block_gemm(false, true, kSub, r, K, A(1), w.xr, K, w.yr, K, A(0), F + r * C, C);
  }
}

// The adjoint of gated_form: dX += tX, dY += tY, dG += X o tX - Y o tY.
template <typename A>
__device__ void gated_form_backward(const A* X, const A* Y, const A* G, int64_t C, int64_t K,
                                    bool diag, const A* dF, A* dX, A* dY, A* dG,
                                    const Scratch<A>& w) {
  // diagonal blocks: row i's tX over its columns j, column i's tY over its rows
  for (int64_t x = threadIdx.x; x < C * K; x += blockDim.x) {
    const int64_t i = x / K, c = x % K, r = i / kSub * kSub;
    A sx = 0, sy = 0;
    for (int64_t j = r; j < (diag ? i + 1 : i); ++j)
      sx += dF[i * C + j] * Y[j * K + c] * acc_exp(G[x] - G[j * K + c]);
    for (int64_t l = diag ? i : i + 1; l < r + kSub; ++l)
      sy += dF[l * C + i] * X[l * K + c] * acc_exp(G[l * K + c] - G[x]);
    w.tx[x] = sx;
    w.ty[x] = sy;
  }
  __syncthreads();
  for (int64_t r = kSub; r < C; r += kSub) {
    const A* Gr = G + r * K;
    for (int64_t x = threadIdx.x; x < kSub * K; x += blockDim.x) {
      w.ei[x] = acc_exp(G[r * K + x] - Gr[x % K]);
      w.xr[x] = X[r * K + x] * w.ei[x];
    }
    for (int64_t x = threadIdx.x; x < r * K; x += blockDim.x) {
      w.ej[x] = acc_exp(Gr[x % K] - G[x]);
      w.yr[x] = Y[x] * w.ej[x];
    }
    __syncthreads();
    block_gemm(false, false, kSub, K, r, A(1), dF + r * C, C, w.yr, K, A(0), w.tmp, K);
    for (int64_t x = threadIdx.x; x < kSub * K; x += blockDim.x)
      w.tx[r * K + x] += w.ei[x] * w.tmp[x];
    __syncthreads();
    block_gemm(true, false, r, K, kSub, A(1), dF + r * C, C, w.xr, K, A(0), w.tmp, K);
    for (int64_t x = threadIdx.x; x < r * K; x += blockDim.x) w.ty[x] += w.ej[x] * w.tmp[x];
    __syncthreads();
  }
  for (int64_t x = threadIdx.x; x < C * K; x += blockDim.x) {
    dX[x] += w.tx[x];
    dY[x] += w.ty[x];
    dG[x] += X[x] * w.tx[x] - Y[x] * w.ty[x];
  }
  __syncthreads();
}

// m = (I + diag(beta) Abar)^-1 by forward substitution, a row at a time.
template <typename A>
__device__ void invert(const A* abar, const A* beta, int64_t C, A* m) {
  for (int64_t i = 0; i < C; ++i) {
    for (int64_t l = threadIdx.x; l < C; l += blockDim.x) {
      A s = l == i ? A(1) : A(0);
      for (int64_t j = l; j < i; ++j) s -= beta[i] * abar[i * C + j] * m[j * C + l];
      m[i * C + l] = l > i ? A(0) : s;
    }
    __syncthreads();
  }
}

// dst[i, :cols] = src[i * stride, :cols] * mul for i < rows, 0 for rows <= i < C.
template <typename T, typename A>
__device__ void load_rows(const T* src, int64_t stride, int64_t rows, int64_t cols, int64_t C,
                          A mul, A* dst) {
  for (int64_t x = threadIdx.x; x < C * cols; x += blockDim.x) {
    const int64_t i = x / cols, j = x % cols;
    dst[x] = i < rows ? mul * to_acc(src[i * stride + j]) : A(0);
  }
}
template <typename T, typename A>
__device__ void store_rows(const A* src, int64_t rows, int64_t cols, T* dst, int64_t stride) {
  for (int64_t x = threadIdx.x; x < rows * cols; x += blockDim.x)
    dst[(x / cols) * stride + x % cols] = from_acc<T>(src[x]);
}

// Chunk c (first token tok, `rows` real rows) of value head hv: every forward quantity but O and
// S' from the start state S0 (kernels/cpu/kda_chunked.cpp's prepare_chunk).
template <typename T, typename A>
__device__ void prepare_chunk(const Dims& d, const Inputs<T>& in, int64_t tok, int64_t rows,
                              int64_t hv, const A* S0, const Scratch<A>& w) {
  const int64_t C = d.C, K = d.K, V = d.V, h = hv / d.G;
  load_rows(in.q + d.qk(tok, h), d.H * K, rows, K, C, A(d.scale), w.q);
  load_rows(in.k + d.qk(tok, h), d.H * K, rows, K, C, A(1), w.k);
  load_rows(in.v + d.vo(tok, hv), d.HV * V, rows, V, C, A(1), w.v);
  load_rows(in.g + d.gk(tok, hv), d.HV * K, rows, K, C, A(1), w.G);
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x)
    w.beta[i] = i < rows ? to_acc(in.beta[d.bt(tok + i, hv)]) : A(0);
  __syncthreads();
  for (int64_t a = threadIdx.x; a < K; a += blockDim.x) {
    for (int64_t i = 1; i < C; ++i) w.G[i * K + a] += w.G[(i - 1) * K + a];
    w.gl[a] = acc_exp(w.G[(C - 1) * K + a]);
  }
  __syncthreads();
  for (int64_t x = threadIdx.x; x < C * K; x += blockDim.x) {
    w.gam[x] = acc_exp(w.G[x]);
    w.e[x] = acc_exp(w.G[(C - 1) * K + x % K] - w.G[x]);
    w.qg[x] = w.q[x] * w.gam[x];
    w.kg[x] = w.k[x] * w.gam[x];
    w.ke[x] = w.k[x] * w.e[x];
  }
  __syncthreads();
  gated_form(w.k, w.k, w.G, C, K, false, w.abar, w);
  gated_form(w.q, w.k, w.G, C, K, true, w.p, w);
  invert(w.abar, w.beta, C, w.m);
  block_gemm(false, false, C, V, K, A(-1), w.kg, K, S0, V, A(1), w.v, V);  // Y = V - (K o Gam) S0
  for (int64_t x = threadIdx.x; x < C * V; x += blockDim.x) w.x[x] = w.beta[x / V] * w.v[x];
  __syncthreads();
  block_gemm(false, false, C, V, C, A(1), w.m, C, w.x, V, A(0), w.u, V);
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    forward_kernel(Dims d, Inputs<T> in, ForwardOutputs<T> out, acc_t<T>* scratch,
                   int64_t per_block, bool want_ht) {
  using A = acc_t<T>;
  const int64_t C = d.C, K = d.K, V = d.V, KV = K * V;
  const Scratch<A> w(C, K, V, 0, scratch + blockIdx.x * per_block, false);
  for (int64_t s = blockIdx.x; s < d.N * d.HV; s += gridDim.x) {
    const int64_t n = s / d.HV, hv = s % d.HV, t0 = d.tok[n], len = d.tok[n + 1] - t0;
    for (int64_t x = threadIdx.x; x < KV; x += blockDim.x)
      w.S[x] = in.h0 ? in.h0[s * KV + x] : A(0);
    __syncthreads();
    for (int64_t c = 0; c * C < len; ++c) {
      const int64_t tok = t0 + c * C, rows = len - c * C < C ? len - c * C : C;
      A* S0 = out.residual + d.state_at(n, hv, c);
      for (int64_t x = threadIdx.x; x < KV; x += blockDim.x) S0[x] = w.S[x];
      __syncthreads();
      prepare_chunk(d, in, tok, rows, hv, S0, w);
      // O = (Q o Gam) S0 + P U;  S' = Diag(Gam_C) S0 + (K o E)^T U
      block_gemm(false, false, C, V, K, A(1), w.qg, K, S0, V, A(0), w.x, V);
      block_gemm(false, false, C, V, C, A(1), w.p, C, w.u, V, A(1), w.x, V);
      store_rows(w.x, rows, V, out.o + d.vo(tok, hv), d.HV * V);
      for (int64_t x = threadIdx.x; x < KV; x += blockDim.x) w.S[x] *= w.gl[x / V];
      __syncthreads();
      block_gemm(true, false, K, V, C, A(1), w.ke, K, w.u, V, A(1), w.S, V);
    }
    if (want_ht)
      for (int64_t x = threadIdx.x; x < KV; x += blockDim.x) out.ht[s * KV + x] = w.S[x];
    __syncthreads();
  }
}

// The backward of chunk c of value head hv of sequence n (first token t0); w.S holds dS' and
// leaves holding dS0.
template <typename T, typename A>
__device__ void backward_chunk(const Dims& d, const Inputs<T>& in, const BackwardArgs<T>& args,
                               int64_t n, int64_t t0, int64_t len, int64_t hv, int64_t c,
                               const Scratch<A>& w) {
  const int64_t C = d.C, K = d.K, V = d.V, KV = K * V;
  const int64_t tok = t0 + c * C, rows = len - c * C < C ? len - c * C : C;
  const A* S0 = args.residual + d.state_at(n, hv, c);
  A* dS = w.S;
  prepare_chunk(d, in, tok, rows, hv, S0, w);
  load_rows(args.d_o + d.vo(tok, hv), d.HV * V, rows, V, C, A(1), w.d_o);
  __syncthreads();
  block_gemm(true, false, C, V, C, A(1), w.p, C, w.d_o, V, A(0), w.du, V);
  block_gemm(false, false, C, V, K, A(1), w.ke, K, dS, V, A(1), w.du, V);
  block_gemm(false, true, C, C, V, A(1), w.d_o, V, w.u, V, A(0), w.dp, C);
  block_gemm(true, false, C, V, C, A(1), w.m, C, w.du, V, A(0), w.dx, V);
  block_gemm(false, true, C, C, V, A(-1), w.dx, V, w.u, V, A(0), w.da, C);
  for (int64_t x = threadIdx.x; x < C * C; x += blockDim.x) {
    const int64_t i = x / C, j = x % C;
    if (j >= i) w.da[x] = 0;
    if (j > i) w.dp[x] = 0;
  }
  __syncthreads();
  // dbeta_i = dA_i . Abar_i + dX_i . Y_i;  then dAbar = diag(beta) dA, dY = diag(beta) dX
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    A db = 0;
    for (int64_t j = 0; j < V; ++j) db += w.dx[i * V + j] * w.v[i * V + j];
    for (int64_t j = 0; j < i; ++j) db += w.da[i * C + j] * w.abar[i * C + j];
    args.dbeta[d.bt(tok + i, hv)] = from_acc<T>(db);
  }
  __syncthreads();
  for (int64_t x = threadIdx.x; x < C * C; x += blockDim.x) w.da[x] *= w.beta[x / C];
  for (int64_t x = threadIdx.x; x < C * V; x += blockDim.x) w.dx[x] *= w.beta[x / V];
  for (int64_t x = threadIdx.x; x < C * K; x += blockDim.x) w.dq[x] = w.dk[x] = w.dG[x] = A(0);
  __syncthreads();
  store_rows(w.dx, rows, V, args.dv + d.vo(tok, hv), d.HV * V);
  block_gemm(false, true, C, K, V, A(1), w.d_o, V, S0, V, A(0), w.t, K);
  for (int64_t x = threadIdx.x; x < C * K; x += blockDim.x) {
    w.dq[x] += w.gam[x] * w.t[x];
    w.dG[x] += w.qg[x] * w.t[x];
  }
  __syncthreads();
  block_gemm(false, true, C, K, V, A(-1), w.dx, V, S0, V, A(0), w.t, K);
  for (int64_t x = threadIdx.x; x < C * K; x += blockDim.x) {
    w.dk[x] += w.gam[x] * w.t[x];
    w.dG[x] += w.kg[x] * w.t[x];
  }
  __syncthreads();
  block_gemm(false, true, C, K, V, A(1), w.u, V, dS, V, A(0), w.t, K);
  for (int64_t x = threadIdx.x; x < C * K; x += blockDim.x) {
    w.dk[x] += w.e[x] * w.t[x];
    w.dG[x] -= w.ke[x] * w.t[x];
  }
  __syncthreads();
  // the chunk's last row: + sum_i (K o E)_i o d_i  and  Gam_C o rowsum(S0 o dS')
  for (int64_t a = threadIdx.x; a < K; a += blockDim.x) {
    A s = 0;
    for (int64_t i = 0; i < C; ++i) s += w.ke[i * K + a] * w.t[i * K + a];
    A z = 0;
    for (int64_t j = 0; j < V; ++j) z += S0[a * V + j] * dS[a * V + j];
    w.dG[(C - 1) * K + a] += s + w.gl[a] * z;
  }
  __syncthreads();
  gated_form_backward(w.q, w.k, w.G, C, K, true, w.dp, w.dq, w.dk, w.dG, w);
  gated_form_backward(w.k, w.k, w.G, C, K, false, w.da, w.dk, w.dk, w.dG, w);
  // dS0 = (Q o Gam)^T dO - (K o Gam)^T dY + Diag(Gam_C) dS'
  for (int64_t x = threadIdx.x; x < KV; x += blockDim.x) dS[x] *= w.gl[x / V];
  __syncthreads();
  block_gemm(true, false, K, V, C, A(1), w.qg, K, w.d_o, V, A(1), dS, V);
  block_gemm(true, false, K, V, C, A(-1), w.kg, K, w.dx, V, A(1), dS, V);
  // dg_t = sum_{i >= t} dG_i
  for (int64_t a = threadIdx.x; a < K; a += blockDim.x)
    for (int64_t i = C - 2; i >= 0; --i) w.dG[i * K + a] += w.dG[(i + 1) * K + a];
  __syncthreads();
  store_rows(w.dG, rows, K, args.dg + d.gk(tok, hv), d.HV * K);
  const int64_t r0 = c * C;
  for (int64_t x = threadIdx.x; x < rows * K; x += blockDim.x) {
    w.dq_sum[r0 * K + x] += A(d.scale) * w.dq[x];
    w.dk_sum[r0 * K + x] += w.dk[x];
  }
  __syncthreads();
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    backward_kernel(Dims d, Inputs<T> in, BackwardArgs<T> args, acc_t<T>* scratch,
                    int64_t per_block, int64_t longest) {
  using A = acc_t<T>;
  const int64_t C = d.C, K = d.K, V = d.V, KV = K * V;
  const Scratch<A> w(C, K, V, longest, scratch + blockIdx.x * per_block, true);
  for (int64_t slice = blockIdx.x; slice < d.N * d.H; slice += gridDim.x) {
    const int64_t n = slice / d.H, h = slice % d.H, t0 = d.tok[n], len = d.tok[n + 1] - t0;
    for (int64_t x = threadIdx.x; x < len * K; x += blockDim.x) w.dq_sum[x] = w.dk_sum[x] = A(0);
    for (int64_t hv = h * d.G; hv < (h + 1) * d.G; ++hv) {
      const int64_t s = n * d.HV + hv;  // the row of dht, dh0
      for (int64_t x = threadIdx.x; x < KV; x += blockDim.x)
        w.S[x] = args.dht ? args.dht[s * KV + x] : A(0);
      __syncthreads();
      for (int64_t c = (len + C - 1) / C - 1; c >= 0; --c)
        backward_chunk(d, in, args, n, t0, len, hv, c, w);
      if (args.dh0)
        for (int64_t x = threadIdx.x; x < KV; x += blockDim.x) args.dh0[s * KV + x] = w.S[x];
      __syncthreads();
    }
    for (int64_t x = threadIdx.x; x < len * K; x += blockDim.x) {
      args.dq[d.qk(t0 + x / K, h) + x % K] = from_acc<T>(w.dq_sum[x]);
      args.dk[d.qk(t0 + x / K, h) + x % K] = from_acc<T>(w.dk_sum[x]);
    }
    __syncthreads();
  }
}

}  // namespace

int64_t chunked_forward_workspace(const Problem& p, int64_t in_bytes) {
  return table_elems(p, in_bytes) + blocks(p, false) * scratch_elems(p, false);
}

int64_t chunked_backward_workspace(const Problem& p, int64_t in_bytes) {
  return table_elems(p, in_bytes) + blocks(p, true) * scratch_elems(p, true);
}

template <typename T>
void chunked_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                     void* stream) {
  check_limits(p);
  const cudaStream_t st = as_stream(stream);
  const Dims d = upload_dims(p, out.workspace, st);
  forward_kernel<T><<<unsigned(blocks(p, false)), kThreads, 0, st>>>(
      d, in, out, out.workspace + table_elems(p, sizeof(T)), scratch_elems(p, false), p.want_ht);
  GDN_KCUDA_LAUNCHED("kda chunked forward");
}

template <typename T>
void chunked_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                      void* stream) {
  check_limits(p);
  const cudaStream_t st = as_stream(stream);
  const Dims d = upload_dims(p, args.workspace, st);
  backward_kernel<T><<<unsigned(blocks(p, true)), kThreads, 0, st>>>(
      d, in, args, args.workspace + table_elems(p, sizeof(T)), scratch_elems(p, true),
      longest_sequence(p));
  GDN_KCUDA_LAUNCHED("kda chunked backward");
}

GDN_KDA_CUDA_INSTANTIATE(chunked)

}  // namespace gdn::kda::cuda_detail
