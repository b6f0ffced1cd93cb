// The ssd baseline's backward on CUDA (its forward is the recurrent forward kernel with the delta
// rule switched off, gdr_recurrent.cu). One block per (sequence, key head) (packed: a bounded grid
// loops over them, backward_slots) runs the CPU's chunked
// backward (kernels/cpu/gdr_ssd.cpp) chunk after chunk in reverse, the value heads of the group
// inside, with every chunk tile in the same per-slice scratch (so the CPU workspace size fits)
// and the small products done by block_gemm. Per chunk and value head (docs/design.md, "The gated
// delta rule" with Vn = V, no W, U, A):
//   DS = dO S^T:   dQ += diag(gamma) DS,  a_i = (gamma_i q_i) . DS_i
//   dV = diag(e) K dS' + P^T dO,  s_i = e_i k_i . (dS' v_i)
//   dS = gamma_C dS' + (diag(gamma) Q)^T dO,  dK += diag(e) V dS'^T
//   dP = dO V^T:  X = dP o P (strictly lower),  dPG = dP o Gam;  dQ += dPG K,  dK += dPG^T Q
//   dg from a, X (+ s in its last row) and c = gamma_C <S, dS'> (gate_grad_store)
// dq, dk of a chunk are summed over the group in the scratch tile before they are stored; dbeta
// is written as zeros. A baseline: simple, deterministic, not fast.
#include <cuda_runtime.h>

#include "kernels/cuda/gdr_common.cuh"

namespace gdn::gdr::cuda_detail {

namespace {

constexpr int kThreads = 256;

template <typename T, typename A>
__device__ void load_padded(const T* src, int64_t stride, int64_t rows, int64_t cols,
                            int64_t pad_rows, A mul, A* dst) {
  for (int64_t e = threadIdx.x; e < pad_rows * cols; e += blockDim.x) {
    const int64_t r = e / cols, l = e % cols;
    dst[e] = r < rows ? mul * to_acc(src[r * stride + l]) : A(0);
  }
}

// The backward of key head h of sequence `seq` (n its index) with the block's scratch at w.
template <typename T>
__device__ __forceinline__ void ssd_backward_key_slice(const Dims& d, const Inputs<T>& in,
                                                       const BackwardArgs<T>& args,
                                                       const SsdBackwardLayout& L, acc_t<T>* w,
                                                       int64_t n, const cuda_seqs::SeqSpan& seq,
                                                       int64_t h) {
  using A = acc_t<T>;
  __shared__ A red[kThreads];
  const int tid = threadIdx.x;
  const int C = int(d.C), K = int(d.K), V = int(d.V);
  const int64_t KV = d.K * d.V, NT = cuda_seqs::chunks_of(seq.len, d.C);
  A *k = w + L.kq, *qs = k + C * K, *qk = w + L.qk, *v = w + L.v, *G = w + L.G;
  A *gamma = w + L.gamma, *e = w + L.e, *qg = w + L.qg, *dq = w + L.dqk, *dk = dq + C * K;
  A *d_o = w + L.d_o, *dG = w + L.dG, *sv = w + L.s, *gam = w + L.gam, *P = w + L.p;
  A *ke = w + L.ke, *DS = w + L.DS, *dv = w + L.dv, *dp = w + L.dp, *X = w + L.xg;
  A *tmp = w + L.tmp, *dS_new = w + L.dS_new, *dS = w + L.dS;
  for (int64_t j = 0; j < d.G; ++j) {
    const int64_t s = n * d.HV + h * d.G + j;
    for (int64_t x = tid; x < KV; x += blockDim.x)
      dS[j * KV + x] = args.dht ? args.dht[s * KV + x] : A(0);
  }
  for (int64_t c = NT - 1; c >= 0; --c) {
    const int64_t t0 = seq.t0 + c * C;  // the chunk's first token
    const int len = int(min(int64_t(C), seq.len - c * C));
    load_padded(in.k + d.qk(t0, h), d.H * K, len, K, C, A(1), k);
    load_padded(in.q + d.qk(t0, h), d.H * K, len, K, C, A(d.scale), qs);
    for (int64_t x = tid; x < 2 * C * K; x += blockDim.x) dq[x] = A(0);
    __syncthreads();
    block_gemm(false, true, C, C, K, A(1), qs, K, k, K, A(0), qk, C);  // Q K^T
    for (int64_t jg = 0; jg < d.G; ++jg) {
      const int64_t hv = h * d.G + jg, go = d.gate(t0, hv);
      const A* S = args.residual + d.state_at(seq, hv, c);
      A* dSp = dS + jg * KV;
      load_padded(in.v + d.vo(t0, hv), d.HV * V, len, V, C, A(1), v);
      load_padded(args.d_o + d.vo(t0, hv), d.HV * V, len, V, C, A(1), d_o);
      if (tid == 0) {  // G = in-chunk cumsum of g; gamma = exp(G); e = exp(G_C - G), exponents <= 0
        A acc = 0;
        for (int i = 0; i < C; ++i) {
          if (i < len) acc += to_acc(in.g[go + i * d.HV]);
          G[i] = acc;
          gamma[i] = acc_exp(acc);
        }
        for (int i = 0; i < C; ++i) e[i] = acc_exp(G[C - 1] - G[i]);
      }
      __syncthreads();
      for (int x = tid; x < C * C; x += blockDim.x) {  // Gam, P = QK o Gam
        const int i = x / C, l = x % C;
        gam[x] = l <= i ? acc_exp(G[i] - G[l]) : A(0);
        P[x] = qk[x] * gam[x];
      }
      for (int x = tid; x < C * K; x += blockDim.x) {
        qg[x] = gamma[x / K] * qs[x];
        ke[x] = e[x / K] * k[x];
      }
      __syncthreads();
      block_gemm(false, true, C, K, V, A(1), d_o, V, S, V, A(0), DS, K);  // DS = dO S^T
      if (tid < C) {
        A acc = 0;
        for (int l = 0; l < K; ++l) acc += qg[tid * K + l] * DS[tid * K + l];
        dG[tid] = acc;
      }
      for (int x = tid; x < C * K; x += blockDim.x) dq[x] += gamma[x / K] * DS[x];
      block_gemm(false, false, C, V, K, A(1), ke, K, dSp, V, A(0), dv, V);  // diag(e) K dS'
      if (tid < C) {
        A acc = 0;
        for (int l = 0; l < V; ++l) acc += dv[tid * V + l] * v[tid * V + l];
        sv[tid] = acc;
      }
      __syncthreads();
      block_gemm(true, false, C, V, C, A(1), P, C, d_o, V, A(1), dv, V);  // += P^T dO
      for (int x = tid; x < len * V; x += blockDim.x)
        args.dv[d.vo(t0 + x / V, hv) + x % V] = from_acc<T>(dv[x]);
      block_gemm(true, false, K, V, C, A(1), qg, K, d_o, V, A(0), dS_new, V);  // (gamma Q)^T dO
      const A gamma_c = gamma[C - 1];
      A part = 0;
      for (int64_t x = tid; x < KV; x += blockDim.x) {
        part += S[x] * dSp[x];
        dS_new[x] += gamma_c * dSp[x];
      }
      const A state_dot = block_sum(part, red);
      block_gemm(false, true, C, K, V, A(1), v, V, dSp, V, A(0), tmp, K);  // V dS'^T
      for (int x = tid; x < C * K; x += blockDim.x) dk[x] += e[x / K] * tmp[x];
      block_gemm(false, true, C, C, V, A(1), d_o, V, v, V, A(0), dp, C);  // dP = dO V^T
      for (int x = tid; x < C * C; x += blockDim.x) {
        const int i = x / C, l = x % C;
        if (l < i) X[x] = dp[x] * P[x];
        dp[x] *= gam[x];
      }
      __syncthreads();
      block_gemm(false, false, C, K, C, A(1), dp, C, k, K, A(1), dq, K);  // dQ += dPG K
      block_gemm(true, false, C, K, C, A(1), dp, C, qs, K, A(1), dk, K);  // dK += dPG^T Q
      if (tid + 1 < C) X[(C - 1) * C + tid] += sv[tid];                   // s joins X's last row
      __syncthreads();
      gate_grad_store(dG, X, gamma_c * state_dot, len, C, args.dg + go, d.HV);
      for (int64_t x = tid; x < KV; x += blockDim.x) dSp[x] = dS_new[x];
      __syncthreads();
    }
    for (int x = tid; x < len * K; x += blockDim.x) {
      const int64_t q_off = d.qk(t0 + x / K, h) + x % K;
      args.dq[q_off] = from_acc<T>(A(d.scale) * dq[x]);
      args.dk[q_off] = from_acc<T>(dk[x]);
    }
    __syncthreads();
  }
  if (args.dh0)
    for (int64_t j = 0; j < d.G; ++j) {
      const int64_t s = n * d.HV + h * d.G + j;
      for (int64_t x = tid; x < KV; x += blockDim.x) args.dh0[s * KV + x] = dS[j * KV + x];
    }
  __syncthreads();  // the next pair this block takes overwrites the scratch
}

// Block x takes the (sequence, key head) pairs x, x + gridDim.x, ... (one pair unpacked). One
// resident block per multiprocessor is enough (a block per pair, or the bounded slots): without
// saying so, ptxas for sm_90 held the loop over pairs to 80 registers and spilled.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    ssd_backward_kernel(Dims d, Inputs<T> in, BackwardArgs<T> args, SsdBackwardLayout L) {
  acc_t<T>* w = args.workspace + blockIdx.x * L.used;
  for (int64_t kh = blockIdx.x; kh < d.seqs.n * d.H; kh += gridDim.x) {
    const int64_t n = kh / d.H;
    ssd_backward_key_slice<T>(d, in, args, L, w, n, d.seqs.at(n), kh % d.H);
  }
}

template <typename T>
__global__ void zero_kernel(T* p, int64_t n) {
  GDN_GRID_LOOP(i, n)
  p[i] = from_acc<T>(acc_t<T>(0));
}

}  // namespace

template <typename T>
void ssd_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                  cudaStream_t stream) {
  const SsdBackwardLayout L = ssd_backward_layout(p);
  const int64_t slots = backward_slots(p);
  const Dims d = dims_of(
      p, upload_seq_table(p, args.workspace + cuda_seqs::seq_table_offset(slots * L.used), stream));
  if (args.dbeta) {
    const int64_t n = p.B * p.T * p.HV;
    zero_kernel<T><<<grid_1d(n, kThreads), kThreads, 0, stream>>>(args.dbeta, n);
    GDN_KCUDA_LAUNCHED("gdr ssd dbeta zero");
  }
  ssd_backward_kernel<T><<<unsigned(slots), kThreads, 0, stream>>>(d, in, args, L);
  GDN_KCUDA_LAUNCHED("gdr ssd backward");
}

int64_t ssd_backward_workspace(const Problem& p) {
  return cuda_seqs::with_seq_table(p, backward_slots(p) * ssd_backward_layout(p).used);
}

GDN_GDR_CUDA_INSTANTIATE_BWD(ssd_backward)

}  // namespace gdn::gdr::cuda_detail
