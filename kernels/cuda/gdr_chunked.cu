// The chunked (WY / UT) gated delta rule's forward on CUDA: the CPU algorithm of
// kernels/cpu/gdr_chunked.cpp with cuBLAS strided-batched GEMMs over every chunk tile and small
// element-wise kernels (gdr_chunked.cuh). Only the inter-chunk recurrence runs chunk after
// chunk, each step one batched GEMM over the value slices:
//   Vn = U - W S;   S' = gamma_C S + (e K)^T Vn;   then   O = (gamma Q) S + P Vn.
// Residual `minimal`: the chunk-start states; `full`: also A and [W | U] (written in place).
#include <cuda_runtime.h>

#include "kernels/cuda/gdr_chunked.cuh"

namespace gdn::gdr::cuda_detail {

namespace {

// states[s, chunk 0] = h0 (or 0).
template <typename A>
__global__ void init_states_kernel(Dims d, const A* h0, A* states) {
  const int64_t KV = d.K * d.V;
  GDN_GRID_LOOP(e, d.B * d.HV * KV) {
    const int64_t s = e / KV, x = e % KV;
    states[s * d.NT * KV + x] = h0 ? h0[e] : A(0);
  }
}

// next[s] = gamma_C(s, c) * S[s, c]; the GEMM adds (e K)^T Vn after.
template <typename A>
__global__ void decay_state_kernel(Dims d, int64_t c, const A* gamma, const A* states, A* next,
                                   int64_t next_stride) {
  const int64_t KV = d.K * d.V;
  GDN_GRID_LOOP(e, d.B * d.HV * KV) {
    const int64_t s = e / KV, x = e % KV, i = s * d.NT + c;
    next[s * next_stride + x] = gamma[i * d.C + d.C - 1] * states[i * KV + x];
  }
}

// out.o = the real rows of every O tile.
template <typename T, typename A>
__global__ void store_o_kernel(Dims d, const A* o, T* out) {
  GDN_GRID_LOOP(e, d.B * d.HV * d.NT * d.C * d.V) {
    const ValueElem x = value_elem(d, e);
    if (x.real) out[x.at] = from_acc<T>(o[e]);
  }
}

// O = (gamma Q) S + P Vn, into the v buffer (v is no longer needed), then its real rows to out.o.
template <typename T, typename A>
void store_outputs(const Dims& d, const ForwardOutputs<T>& out, const ChunkedLayout<A>& w,
                   cudaStream_t stream) {
  const int64_t C = d.C, K = d.K, V = d.V, KV = K * V;
  A* o = w.v;
  batched<A>(d, false, false, C, V, K, 1.0, {w.qg, K, C * K}, {out.residual, V, KV}, 0.0, o, V,
             C * V, stream);
  batched<A>(d, false, false, C, V, C, 1.0, {w.p, C, C * C}, {w.vn, V, C * V}, 1.0, o, V, C * V,
             stream);
  store_o_kernel<T, A>
      <<<grid_1d(d.B * d.HV * d.NT * C * V, kThreads), kThreads, 0, stream>>>(d, o, out.o);
  GDN_KCUDA_LAUNCHED("gdr chunked store o");
}

// The recurrence over chunks, chunk after chunk over the value slices, from h0 (or zero):
// Vn = U - W S;  S' = gamma_C S + (e K)^T Vn (the states into the residual, the last one into ht).
template <typename T, typename A>
void forward_recurrence(const Dims& d, const Problem& p, const Inputs<T>& in,
                        const ForwardOutputs<T>& out, const ChunkedLayout<A>& w,
                        cudaStream_t stream) {
  const int64_t C = d.C, K = d.K, V = d.V, KV = K * V, NT = d.NT, KpV = K + V;
  const int64_t slices = d.B * d.HV;
  A* states = out.residual;
  copy_u(d, w, stream);
  init_states_kernel<A><<<grid_1d(slices * KV, kThreads), kThreads, 0, stream>>>(d, in.h0, states);
  GDN_KCUDA_LAUNCHED("gdr chunked init states");
  for (int64_t c = 0; c < NT; ++c) {
    at_chunk<A>(d, c, false, false, C, V, K, -1.0, {w.wu, KpV, C * KpV}, {states, V, KV}, 1.0, w.vn,
                V, C * V, stream);
    A* next = c + 1 < NT ? states + (c + 1) * KV : (p.want_ht ? out.ht : nullptr);
    if (!next) break;
    const int64_t next_stride = c + 1 < NT ? NT * KV : KV;
    decay_state_kernel<A><<<grid_1d(slices * KV, kThreads), kThreads, 0, stream>>>(
        d, c, w.gamma, states, next, next_stride);
    GDN_KCUDA_LAUNCHED("gdr chunked decay state");
    gemm_strided_batched<A>(true, false, K, V, C, 1.0, w.ke + c * C * K, K, NT * C * K,
                            w.vn + c * C * V, V, NT * C * V, 1.0, next, V, next_stride, slices,
                            stream);
  }
}

}  // namespace

template <typename T>
void chunked_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                     cudaStream_t stream) {
  using A = acc_t<T>;
  const ChunkedLayout<A> w(p, out.workspace, out.residual, false, ChunkedSide::cuda);
  const Dims d = dims_of(p);
  load_all(d, in, w, stream);
  prepare_chunks(d, w, false, static_cast<A*>(nullptr), stream);
  forward_recurrence(d, p, in, out, w, stream);
  store_outputs(d, out, w, stream);
}

int64_t chunked_workspace(const Problem& p, bool backward) {
  return ChunkedLayout<float>(p, nullptr, nullptr, backward, ChunkedSide::cuda).used;
}

GDN_GDR_CUDA_INSTANTIATE_FWD(chunked_forward, cudaStream_t)

}  // namespace gdn::gdr::cuda_detail
