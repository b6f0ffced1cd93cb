// The recurrent Kimi Delta Attention on CUDA (the CPU's kernels/cpu/kda_recurrent.cpp step by
// step): fp32 state (fp64 for fp64 inputs), K <= 256, any V; packed sequences through a table of
// token and chunk offsets copied to the head of the workspace. The residual is the CPU's (the state
// at every chunk start, [sequence][HV][chunk][K][V]), so either device's backward takes it.
//
// Forward: the columns of S evolve independently (u_j = beta (v_j - (Diag(alpha) S)[:, j] . k)
// and S[:, j] += k u_j touch column j only), so one warp owns one column of one (sequence, value
// head) in registers, lane l holding rows l, l + 32, ...; a step's two dot products are warp sums.
//
// Backward: a bounded grid of blocks, each taking (sequence, key head) slices in turn, the group's
// value heads in order (dq, dk summed in the workspace in a fixed order), chunks in reverse. A
// chunk recomputes its states from the saved one (one thread per column), then runs the steps in
// reverse, with S_a = Diag(alpha) S_prev and r = S_a^T k:
//   dq += scale S_t do;  dS += q do^T;  du = dS^T k;  dbeta = du . (v - r);  dv = beta du;
//   dr = -beta du;  dk += beta dS (v - r) + S_a dr;  dS += k dr^T;  dg_a = <S_a[a], dS[a]>;
//   dS_prev = Diag(alpha) dS
// Row sums (over V) are warp sums, one warp per row; column sums one thread per column; dbeta a
// block sum. No atomics: results are the same bits on every run.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/kda_common.cuh"

namespace gdn::kda::cuda_detail {

namespace {

using ::gdn::cuda::acc_exp;
using ::gdn::cuda::as_stream;
using ::gdn::cuda::block_sum;
using ::gdn::cuda::warp_sum;

constexpr int kRowsPerLane = kMaxK / 32;
constexpr int kWarps = 8;  // columns per forward block
constexpr int kBwdThreads = 256;
constexpr int kBwdWarps = kBwdThreads / 32;
constexpr int64_t kMaxBwdBlocks = 128;  // backward blocks (each with its chunk's states)

int64_t backward_blocks(const Problem& p) {
  return std::min(p.num_seqs() * p.H, kMaxBwdBlocks);
}

// One backward block's scratch: the chunk's states, dS, and the group's dq, dk sums.
int64_t block_scratch(const Problem& p) {
  return p.chunk * p.K * p.V + p.K * p.V + 2 * longest_sequence(p) * p.K;
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32)
    forward_kernel(Dims d, Inputs<T> in, T* o, acc_t<T>* ht, acc_t<T>* states) {
  using A = acc_t<T>;
  const auto [lane, s, j] = warp_column<kWarps>();
  if (j >= d.V) return;  // a whole warp; no block-level synchronisation below
  const int64_t n = s / d.HV, hv = s % d.HV, h = hv / d.G, KV = d.K * d.V;
  const int64_t t0 = d.tok[n], len = d.tok[n + 1] - t0;
  const A scale = A(d.scale);
  A S[kRowsPerLane];
  load_state_column(S, in.h0, s * KV, j, d.K, d.V, lane);
  for (int64_t i_t = 0; i_t < len; ++i_t) {
    const int64_t t = t0 + i_t;
    if (i_t % d.C == 0)
      store_state_column(S, states + d.state_at(n, hv, i_t / d.C), j, d.K, d.V, lane);
    const T* qt = in.q + d.qk(t, h);
    const T* kt = in.k + d.qk(t, h);
    const T* gt = in.g + d.gk(t, hv);
    A kr[kRowsPerLane];
    A dot = 0;  // (Diag(alpha) S)[:, j] . k
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      const int64_t a = lane + 32 * i;
      kr[i] = a < d.K ? to_acc(kt[a]) : A(0);
      S[i] *= a < d.K ? acc_exp(to_acc(gt[a])) : A(0);
      dot += kr[i] * S[i];
    }
    const A u = to_acc(in.beta[d.bt(t, hv)]) * (to_acc(in.v[d.vo(t, hv) + j]) - warp_sum(dot));
    const A out = update_state_column(S, kr, u, qt, scale, d.K, lane);
    if (lane == 0) o[d.vo(t, hv) + j] = from_acc<T>(out);
  }
  if (ht) store_state_column(S, ht + s * KV, j, d.K, d.V, lane);
}

// states[i] = S after step t0 + i of value head hv, from the chunk-start S0; one thread a column.
template <typename T>
__device__ __forceinline__ void recompute_states(const Dims& d, const Inputs<T>& in, int64_t hv,
                                                 int64_t t0, int64_t len, const acc_t<T>* S0,
                                                 acc_t<T>* states) {
  using A = acc_t<T>;
  const int64_t K = d.K, V = d.V, KV = K * V, h = hv / d.G;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
    for (int64_t i = 0; i < len; ++i) {
      const int64_t t = t0 + i;
      const A* prev = i == 0 ? S0 : states + (i - 1) * KV;
      A* next = states + i * KV;
      const T* kt = in.k + d.qk(t, h);
      const T* gt = in.g + d.gk(t, hv);
      A r = 0;
      for (int64_t a = 0; a < K; ++a) r += acc_exp(to_acc(gt[a])) * to_acc(kt[a]) * prev[a * V + j];
      const A u = to_acc(in.beta[d.bt(t, hv)]) * (to_acc(in.v[d.vo(t, hv) + j]) - r);
      for (int64_t a = 0; a < K; ++a)
        next[a * V + j] = acc_exp(to_acc(gt[a])) * prev[a * V + j] + to_acc(kt[a]) * u;
    }
  __syncthreads();
}

template <typename T>
__global__ void __launch_bounds__(kBwdThreads, 1)
    backward_kernel(Dims d, Inputs<T> in, BackwardArgs<T> args, acc_t<T>* scratch,
                    int64_t per_block) {
  using A = acc_t<T>;
  __shared__ A q[kMaxK], k[kMaxK], alpha[kMaxK];
  __shared__ A red[kBwdThreads];
  __shared__ A beta_s;
  extern __shared__ __align__(16) unsigned char vec_bytes[];  // 4 V-vectors: v - r, do, du, dr
  A* vr = reinterpret_cast<A*>(vec_bytes);
  A *d_o = vr + d.V, *du = d_o + d.V, *dr = du + d.V;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t K = d.K, V = d.V, KV = K * V, C = d.C;
  const A scale = A(d.scale);
  A* ws = scratch + blockIdx.x * per_block;
  A *states = ws, *dS = states + C * KV, *dq = dS + KV;
  for (int64_t slice = blockIdx.x; slice < d.N * d.H; slice += gridDim.x) {
    const int64_t n = slice / d.H, h = slice % d.H;
    const int64_t t0 = d.tok[n], len = d.tok[n + 1] - t0, NT = d.chunk[n + 1] - d.chunk[n];
    A* dk = dq + len * K;
    for (int64_t e = tid; e < 2 * len * K; e += blockDim.x) dq[e] = A(0);
    __syncthreads();
    for (int64_t hv = h * d.G; hv < (h + 1) * d.G; ++hv) {
      const int64_t s = n * d.HV + hv;  // the row of dht, dh0
      for (int64_t e = tid; e < KV; e += blockDim.x) dS[e] = args.dht ? args.dht[s * KV + e] : A(0);
      __syncthreads();
      for (int64_t c = NT - 1; c >= 0; --c) {
        const int64_t c0 = c * C, clen = len - c0 < C ? len - c0 : C;
        const A* S0 = args.residual + d.state_at(n, hv, c);
        recompute_states(d, in, hv, t0 + c0, clen, S0, states);
        for (int64_t i = clen - 1; i >= 0; --i) {
          const int64_t it = c0 + i, t = t0 + it;
          const A* Sp = i == 0 ? S0 : states + (i - 1) * KV;
          const A* St = states + i * KV;
          for (int64_t a = tid; a < K; a += blockDim.x) {
            q[a] = scale * to_acc(in.q[d.qk(t, h) + a]);
            k[a] = to_acc(in.k[d.qk(t, h) + a]);
            alpha[a] = acc_exp(to_acc(in.g[d.gk(t, hv) + a]));
          }
          for (int64_t j = tid; j < V; j += blockDim.x) d_o[j] = to_acc(args.d_o[d.vo(t, hv) + j]);
          if (tid == 0) beta_s = to_acc(in.beta[d.bt(t, hv)]);
          __syncthreads();
          const A beta = beta_s;
          // dq += scale S_t do (rows), then dS += q do^T
          for (int64_t a = warp; a < K; a += kBwdWarps) {
            const A x = warp_dot(St + a * V, d_o, V, lane);
            if (lane == 0) dq[it * K + a] += scale * x;
          }
          for (int64_t e = tid; e < KV; e += blockDim.x) dS[e] += q[e / V] * d_o[e % V];
          __syncthreads();
          // columns: v - r with r = S_a^T k, and du = dS^T k
          for (int64_t j = tid; j < V; j += blockDim.x) {
            A r = 0, x = 0;
            for (int64_t a = 0; a < K; ++a) {
              r += alpha[a] * k[a] * Sp[a * V + j];
              x += k[a] * dS[a * V + j];
            }
            vr[j] = to_acc(in.v[d.vo(t, hv) + j]) - r;
            du[j] = x;
          }
          __syncthreads();
          A part = 0;
          for (int64_t j = tid; j < V; j += blockDim.x) {
            part += du[j] * vr[j];
            args.dv[d.vo(t, hv) + j] = from_acc<T>(beta * du[j]);
            dr[j] = -beta * du[j];
          }
          const A dbeta = block_sum(part, red);  // synchronises: dr is complete after it
          if (tid == 0) args.dbeta[d.bt(t, hv)] = from_acc<T>(dbeta);
          // rows: dk += beta dS (v - r) + S_a dr;  dS += k dr^T;  dg = <S_a, dS>;  dS *= alpha
          for (int64_t a = warp; a < K; a += kBwdWarps) {
            A* ds = dS + a * V;
            const A* sp = Sp + a * V;
            A x = 0, y = 0, z = 0;
            for (int64_t j = lane; j < V; j += 32) {
              x += ds[j] * vr[j];
              y += sp[j] * dr[j];
              const A v = ds[j] + k[a] * dr[j];
              z += sp[j] * v;
              ds[j] = alpha[a] * v;
            }
            x = warp_sum(x);
            y = warp_sum(y);
            z = warp_sum(z);
            if (lane == 0) {
              dk[it * K + a] += beta * x + alpha[a] * y;
              args.dg[d.gk(t, hv) + a] = from_acc<T>(alpha[a] * z);
            }
          }
          __syncthreads();
        }
      }
      if (args.dh0)
        for (int64_t e = tid; e < KV; e += blockDim.x) args.dh0[s * KV + e] = dS[e];
      __syncthreads();
    }
    for (int64_t e = tid; e < len * K; e += blockDim.x) {
      const int64_t it = e / K, a = e % K;
      args.dq[d.qk(t0 + it, h) + a] = from_acc<T>(dq[e]);
      args.dk[d.qk(t0 + it, h) + a] = from_acc<T>(dk[e]);
    }
    __syncthreads();
  }
}

}  // namespace

int64_t recurrent_forward_workspace(const Problem& p, int64_t in_bytes) {
  return table_elems(p, in_bytes);
}

int64_t recurrent_backward_workspace(const Problem& p, int64_t in_bytes) {
  return table_elems(p, in_bytes) + backward_blocks(p) * block_scratch(p);
}

template <typename T>
void recurrent_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                       void* stream) {
  check_limits(p);
  const cudaStream_t st = as_stream(stream);
  const Dims d = upload_dims(p, out.workspace, st);
  const dim3 grid(unsigned(d.N * p.HV), unsigned((p.V + kWarps - 1) / kWarps));
  forward_kernel<T>
      <<<grid, kWarps * 32, 0, st>>>(d, in, out.o, p.want_ht ? out.ht : nullptr, out.residual);
  GDN_KCUDA_LAUNCHED("kda recurrent forward");
}

template <typename T>
void recurrent_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                        void* stream) {
  using A = acc_t<T>;
  check_limits(p);
  const cudaStream_t st = as_stream(stream);
  const Dims d = upload_dims(p, args.workspace, st);
  const int64_t per_block = block_scratch(p);
  const size_t shared = 4 * size_t(p.V) * sizeof(A);
  if (shared > 48 * 1024)
    GDN_KCUDA_CHECK(cudaFuncSetAttribute(backward_kernel<T>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  backward_kernel<T><<<unsigned(backward_blocks(p)), kBwdThreads, shared, st>>>(
      d, in, args, args.workspace + table_elems(p, sizeof(T)), per_block);
  GDN_KCUDA_LAUNCHED("kda recurrent backward");
}

GDN_KDA_CUDA_INSTANTIATE(recurrent)

}  // namespace gdn::kda::cuda_detail
