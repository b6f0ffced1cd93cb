// The chunked gated delta rule's backward on CUDA: kernels/cpu/gdr_chunked.cpp's backward with
// cuBLAS strided-batched GEMMs over every chunk tile (docs/design.md, "The gated delta rule" has
// the math). The chunk-start states come from the residual; A and [W | U] too with the `full`
// policy, else they are recomputed. The reverse recurrence runs chunk after chunk, one batched GEMM
// per step over the value slices:
//   dS' of chunk c = dS of chunk c + 1 (or dht);  dVn += diag(e) K dS';
//   dS = gamma_C dS' + (gamma Q)^T dO - W^T dVn.
// Then all chunk-local products as batched GEMMs, one block per chunk for the element-wise terms
// (dg, dbeta, dv, Bsym), and the per-value-head dq, dk summed over each group in a fixed order.
#include <cuda_runtime.h>

#include "kernels/cuda/gdr_chunked.cuh"

namespace gdn::gdr::cuda_detail {

namespace {

constexpr int kChunkThreads = 64;  // one thread per chunk row (C <= 64); a power of two

// Chunk c of every slice: dSend = dS' (dS of chunk c + 1, dht or 0); dSloc += gamma_C dS'.
template <typename A>
__global__ void state_grad_start_kernel(Dims d, int64_t c, const A* dht, const A* gamma, A* dSloc,
                                        A* dSend) {
  const int64_t KV = d.K * d.V;
  GDN_GRID_LOOP(e, d.B * d.HV * KV) {
    const int64_t s = e / KV, x = e % KV, i = s * d.NT + c;
    const A src = c + 1 < d.NT ? dSloc[(i + 1) * KV + x] : (dht ? dht[e] : A(0));
    dSend[i * KV + x] = src;
    dSloc[i * KV + x] += gamma[i * d.C + d.C - 1] * src;
  }
}

template <typename A>
__global__ void copy_dh0_kernel(Dims d, const A* dSloc, A* dh0) {
  const int64_t KV = d.K * d.V;
  GDN_GRID_LOOP(e, d.B * d.HV * KV) {
    dh0[e] = dSloc[(e / KV) * d.NT * KV + e % KV];
  }
}

// dot of two rows of length n.
template <typename A>
__device__ __forceinline__ A row_dot(const A* x, const A* y, int64_t n) {
  A s = 0;
  for (int64_t l = 0; l < n; ++l) s += x[l] * y[l];
  return s;
}

// Block per value chunk, thread r per row. With DS = dO S^T in the dQ rows and Vn dS'^T in the dK
// rows of dqk, [dXw | dXu] in x, dP in dpb, dM in da:
//   s_r = e_r k_r . (dS' vn_r);  dK = diag(e) Vn dS'^T;  a_r = (gamma q)_r . DS_r;  dQ = gamma DS
//   dK += beta gamma dXw;  dV = beta dXu;  dbeta = gamma dXw . k + dXu . v;  a += beta gamma dXw .
//   k X = dP o P (strictly lower);  dPG = dP o Gam;  dbeta += rowsum(dM o Gam o KK); Bsym = B +
//   B^T, B = diag(beta) (dM o Gam);  X += dM o M;  X's last row += s dg from a, X and c = gamma_C
//   <S, dS'> (gate_grad_store).
template <typename T, typename A>
__global__ void __launch_bounds__(kChunkThreads)
    chunk_grads_kernel(Dims d, ChunkedLayout<A> w, const A* states, T* dv, T* dg, T* dbeta) {
  __shared__ A dbeta_r[kMaxC];
  __shared__ A red[kChunkThreads];
  const int64_t C = d.C, K = d.K, V = d.V, KpV = K + V, KV = K * V;
  const int64_t i = blockIdx.x, s = i / d.NT, c = i % d.NT, b = s / d.HV, hv = s % d.HV;
  const int64_t t0 = c * C, len = min(C, d.T - t0), go = d.gate(b, t0, hv);
  const int64_t ki = d.key_slice(s) * d.NT + c;
  const A *k = w.kq + ki * 2 * C * K, *KK = w.kqk + ki * 2 * C * C;
  const A *gamma = w.gamma + i * C, *e = w.e + i * C, *beta = w.beta + i * C;
  const A *gam = w.gam + i * C * C, *P = w.p + i * C * C, *dM = w.da + i * C * C;
  const A *v = w.v + i * C * V, *qg = w.qg + i * C * K;
  A *dG = w.dG + i * C, *sv = w.s + i * C, *DS = w.dqk + i * 2 * C * K, *dkv = DS + C * K;
  A *dP = w.dpb + i * 2 * C * C, *bsym = dP + C * C, *dx = w.x + i * C * KpV, *X = w.xg + i * C * C;
  const int64_t r = threadIdx.x;
  if (r < C) {
    sv[r] = e[r] * row_dot(dkv + r * K, k + r * K, K);
    dG[r] = row_dot(qg + r * K, DS + r * K, K);
    for (int64_t l = 0; l < K; ++l) {
      dkv[r * K + l] *= e[r];
      DS[r * K + l] *= gamma[r];
    }
    const A* dxw = dx + r * KpV;
    const A bg = beta[r] * gamma[r], xk = row_dot(dxw, k + r * K, K);
    for (int64_t l = 0; l < K; ++l) dkv[r * K + l] += bg * dxw[l];
    A db = gamma[r] * xk + row_dot(dxw + K, v + r * V, V);
    dG[r] += bg * xk;
    if (r < len)
      for (int64_t l = 0; l < V; ++l)
        dv[d.vo(b, t0 + r, hv) + l] = from_acc<T>(beta[r] * dxw[K + l]);
    bsym[r * C + r] = 0;
    for (int64_t l = 0; l < C; ++l) {
      if (l < r) X[r * C + l] = dP[r * C + l] * P[r * C + l];
      dP[r * C + l] *= gam[r * C + l];
    }
    for (int64_t l = 0; l < r; ++l) {  // row r of B, and its mirror in column r (rows l < r)
      const A dmg = dM[r * C + l] * gam[r * C + l];
      db += dmg * KK[r * C + l];
      const A bl = beta[r] * dmg;
      bsym[r * C + l] = bl;
      bsym[l * C + r] = bl;
      X[r * C + l] += bl * KK[r * C + l];
    }
    dbeta_r[r] = db;
  }
  __syncthreads();
  if (r + 1 < C) X[(C - 1) * C + r] += sv[r];  // s joins X's last row
  A part = 0;
  for (int64_t x = threadIdx.x; x < KV; x += blockDim.x)
    part += states[i * KV + x] * w.dSend[i * KV + x];
  const A state_dot = block_sum(part, red);  // its barriers also publish X
  gate_grad_store(dG, X, gamma[C - 1] * state_dot, int(len), int(C), dg + go, d.HV);
  if (r < len) dbeta[go + r * d.HV] = from_acc<T>(dbeta_r[r]);
}

// dq = scale sum_j dQ_j, dk = sum_j dK_j over the value heads j of each group, in order.
template <typename T, typename A>
__global__ void group_sum_kernel(Dims d, const A* dqk, T* dq, T* dk) {
  const int64_t C = d.C, K = d.K;
  GDN_GRID_LOOP(e, d.B * d.H * d.NT * C * K) {
    const int64_t i = e / (C * K), r = (e / K) % C, l = e % K;
    const int64_t ks = i / d.NT, c = i % d.NT, b = ks / d.H, h = ks % d.H, t = c * C + r;
    if (t >= d.T) continue;
    const int64_t first = (b * d.HV + h * d.G) * d.NT + c;  // value tile of j = 0
    A sum_q = 0, sum_k = 0;
    for (int64_t j = 0; j < d.G; ++j) {
      const A* row = dqk + ((first + j * d.NT) * 2 * C + r) * K + l;
      sum_q += row[0];
      sum_k += row[C * K];
    }
    dq[d.qk(b, t, h) + l] = from_acc<T>(A(d.scale) * sum_q);
    dk[d.qk(b, t, h) + l] = from_acc<T>(sum_k);
  }
}

// Loads every chunk and recomputes its forward (A, [W | U] come from the residual under `full`):
// Vn = U - W S;  dVn = P^T dO (+ diag(e) K dS' in state_grad_recurrence), in the right columns of
// dWU;  dSloc = (gamma Q)^T dO.
template <typename T, typename A>
void recompute_chunks(const Dims& d, const Problem& p, const Inputs<T>& in,
                      const BackwardArgs<T>& args, const ChunkedLayout<A>& w, cudaStream_t stream) {
  const int64_t C = d.C, K = d.K, V = d.V, KV = K * V, KpV = K + V, nv = d.B * d.HV * d.NT;
  load_all(d, in, w, stream);
  load_values_kernel<T, A>
      <<<grid_1d(nv * C * V, kThreads), kThreads, 0, stream>>>(d, args.d_o, w.d_o);
  GDN_KCUDA_LAUNCHED("gdr chunked load dO");
  prepare_chunks(d, w, p.residual == Residual::full, w.gam, stream);
  copy_u(d, w, stream);
  batched<A>(d, false, false, C, V, K, -1.0, {w.wu, KpV, C * KpV}, {args.residual, V, KV}, 1.0,
             w.vn, V, C * V, stream);
  batched<A>(d, true, false, C, V, C, 1.0, {w.p, C, C * C}, {w.d_o, V, C * V}, 0.0, w.dwu + K, KpV,
             C * KpV, stream);
  batched<A>(d, true, false, K, V, C, 1.0, {w.qg, K, C * K}, {w.d_o, V, C * V}, 0.0, w.dSloc, V, KV,
             stream);
}

// The recurrence in reverse, chunk after chunk over the value slices: dVn += diag(e) K dS';
// dS = gamma_C dS' + dSloc - W^T dVn. dSend[c] keeps dS' of chunk c, dSloc[c] becomes dS of
// chunk c; dh0 = dS of chunk 0 (with an initial state).
template <typename T, typename A>
void state_grad_recurrence(const Dims& d, const Problem& p, const BackwardArgs<T>& args,
                           const ChunkedLayout<A>& w, cudaStream_t stream) {
  const int64_t C = d.C, K = d.K, V = d.V, KV = K * V, KpV = K + V, slices = d.B * d.HV;
  A* dvn = w.dwu + K;
  for (int64_t c = d.NT - 1; c >= 0; --c) {
    state_grad_start_kernel<A><<<grid_1d(slices * KV, kThreads), kThreads, 0, stream>>>(
        d, c, args.dht, w.gamma, w.dSloc, w.dSend);
    GDN_KCUDA_LAUNCHED("gdr chunked state grad");
    at_chunk<A>(d, c, false, false, C, V, K, 1.0, {w.ke, K, C * K}, {w.dSend, V, KV}, 1.0, dvn, KpV,
                C * KpV, stream);
    at_chunk<A>(d, c, true, false, K, V, C, -1.0, {w.wu, KpV, C * KpV}, {dvn, KpV, C * KpV}, 1.0,
                w.dSloc, V, KV, stream);
  }
  if (p.has_h0) {
    copy_dh0_kernel<A>
        <<<grid_1d(slices * KV, kThreads), kThreads, 0, stream>>>(d, w.dSloc, args.dh0);
    GDN_KCUDA_LAUNCHED("gdr chunked dh0");
  }
}

// The chunk-local products over the whole length (DS, Vn dS'^T in the dQ, dK rows of dqk).
template <typename A>
void chunk_products(const Dims& d, const A* states, const ChunkedLayout<A>& w,
                    cudaStream_t stream) {
  const int64_t C = d.C, K = d.K, V = d.V, KV = K * V, KpV = K + V;
  A *dvn = w.dwu + K, *dkv = w.dqk + C * K;
  batched<A>(d, false, true, C, C, V, 1.0, {w.d_o, V, C * V}, {w.vn, V, C * V}, 0.0, w.dpb, C,
             2 * C * C, stream);  // dP = dO Vn^T
  batched<A>(d, false, true, C, K, V, 1.0, {w.d_o, V, C * V}, {states, V, KV}, 0.0, w.dqk, K,
             2 * C * K, stream);  // DS = dO S^T, into the dQ rows
  batched<A>(d, false, true, C, K, V, 1.0, {w.vn, V, C * V}, {w.dSend, V, KV}, 0.0, dkv, K,
             2 * C * K, stream);  // Vn dS'^T, into the dK rows
  batched<A>(d, false, true, C, K, V, -1.0, {dvn, KpV, C * KpV}, {states, V, KV}, 0.0, w.dwu, KpV,
             C * KpV, stream);  // dW = -dVn S^T
  batched<A>(d, false, true, C, C, KpV, 1.0, {w.dwu, KpV, C * KpV}, {w.x, KpV, C * KpV}, 0.0, w.da,
             C, C * C, stream);  // dA = [dW | dU] X^T
  batched<A>(d, true, false, C, KpV, C, 1.0, {w.a, C, C * C}, {w.dwu, KpV, C * KpV}, 0.0, w.x, KpV,
             C * KpV, stream);  // [dXw | dXu] = A^T [dW | dU], over X
  batched<A>(d, false, true, C, C, C, 1.0, {w.da, C, C * C}, {w.a, C, C * C}, 0.0, w.t1, C, C * C,
             stream);  // T1 = dA A^T
  batched<A>(d, true, false, C, C, C, -1.0, {w.a, C, C * C}, {w.t1, C, C * C}, 0.0, w.da, C, C * C,
             stream);  // dM = -A^T T1 (strict lower used)
}

// The element-wise terms of every chunk (chunk_grads_kernel: dv, dg, dbeta, dPG, Bsym), then
// [dQ; dK] += [dPG; Bsym] K and dK += dPG^T Q per value head (k, q from the key tile), and dq, dk
// summed over each group.
template <typename T, typename A>
void chunk_grads(const Dims& d, const BackwardArgs<T>& args, const ChunkedLayout<A>& w,
                 cudaStream_t stream) {
  const int64_t C = d.C, K = d.K;
  chunk_grads_kernel<T, A><<<unsigned(d.B * d.HV * d.NT), kChunkThreads, 0, stream>>>(
      d, w, args.residual, args.dv, args.dg, args.dbeta);
  GDN_KCUDA_LAUNCHED("gdr chunked chunk grads");
  batched<A>(d, false, false, 2 * C, K, C, 1.0, {w.dpb, C, 2 * C * C}, {w.kq, K, 2 * C * K, true},
             1.0, w.dqk, K, 2 * C * K, stream);
  batched<A>(d, true, false, C, K, C, 1.0, {w.dpb, C, 2 * C * C},
             {w.kq + C * K, K, 2 * C * K, true}, 1.0, w.dqk + C * K, K, 2 * C * K, stream);
  group_sum_kernel<T, A><<<grid_1d(d.B * d.H * d.NT * C * K, kThreads), kThreads, 0, stream>>>(
      d, w.dqk, args.dq, args.dk);
  GDN_KCUDA_LAUNCHED("gdr chunked group sum");
}

}  // namespace

template <typename T>
void chunked_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                      cudaStream_t stream) {
  using A = acc_t<T>;
  const Dims d = dims_of(p);
  const ChunkedLayout<A> w(p, args.workspace, const_cast<A*>(args.residual), true,
                           ChunkedSide::cuda);
  recompute_chunks(d, p, in, args, w, stream);
  state_grad_recurrence(d, p, args, w, stream);
  chunk_products(d, args.residual, w, stream);
  chunk_grads(d, args, w, stream);
}

GDN_GDR_CUDA_INSTANTIATE_BWD(chunked_backward)

}  // namespace gdn::gdr::cuda_detail
