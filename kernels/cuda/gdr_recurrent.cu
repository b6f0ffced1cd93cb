// The recurrent gated delta rule on CUDA: the readable reference, step by step, fp32 state (fp64
// for fp64 inputs), any K <= 256, V <= 512. Packed sequences (gdr_seqs.h): the grid covers
// (sequence, head); each block runs its sequence from its own h0 to its own ht.
//
// Forward: the columns of S evolve independently (u_j = beta (v_j - S[:, j] . k) and the update
// S[:, j] += k u_j touch column j only), so one warp owns one column of one (b, value head) and
// keeps it in registers, lane l holding rows l, l + 32, ... (K <= 32 * kRowsPerLane); the two dot
// products per step are warp butterflies. A block is kWarps columns of one slice. The state at
// the start of every chunk goes to the residual (the CPU recurrent's layout, [sequence][head]
// [chunk]); `ssd` (no delta rule: u = v) uses the same kernel.
//
// Backward: one block per (sequence, key head) (packed: a bounded grid loops over them,
// backward_slots), the value heads of the group in order (so dq, dk are
// summed over the group in a fixed order, in the workspace, in fp32), chunks in reverse. A chunk
// first recomputes its per-step states from the saved chunk-start state into the workspace (column
// by column, one thread per column), then runs the step backward in reverse:
//   o = S_t^T q:          dq += scale S_t do;   dS += q do^T
//   u = beta (v - r), r = (alpha S_prev)^T k:   dk += beta dS (v - r);  du = dS^T k
//   dbeta = du . (v - r);  dv = beta du;  dr = -beta du;  dk += alpha S_prev dr
//   dS += k dr^T;  dg = alpha <S_prev, dS>;  dS_prev = alpha dS
// Row sums (over V, for dq and dk) are warp butterflies with one warp per row; column sums (over
// K) one thread per column; scalars (dbeta, dg) a block tree. No atomics.
#include <cuda_runtime.h>

#include "kernels/cuda/gdr_common.cuh"

namespace gdn::gdr::cuda_detail {

namespace {

constexpr int kWarps = 8;        // columns per forward block
constexpr int kRowsPerLane = 8;  // K <= 32 * 8
constexpr int kBwdThreads = 256;
constexpr int kBwdWarps = kBwdThreads / 32;
static_assert(32 * kRowsPerLane >= kMaxK, "a warp's registers hold a state column of K rows");

template <typename T, bool kSsd>
__global__ void __launch_bounds__(kWarps * 32)
    forward_kernel(Dims d, Inputs<T> in, T* o, acc_t<T>* ht, acc_t<T>* states) {
  using A = acc_t<T>;
  const auto [lane, s, j] = warp_column<kWarps>();
  if (j >= d.V) return;  // a whole warp; no block-level synchronisation below
  const int64_t hv = s % d.HV, h = hv / d.G, KV = d.K * d.V;
  const cuda_seqs::SeqSpan seq = d.seqs.at(s / d.HV);  // slice s = (sequence, hv)
  const A scale = A(d.scale);
  A S[kRowsPerLane];
  load_state_column(S, in.h0, s * KV, j, d.K, d.V, lane);
  for (int64_t i_t = 0; i_t < seq.len; ++i_t) {
    const int64_t t = seq.t0 + i_t;  // the token
    if (i_t % d.C == 0)
      store_state_column(S, states + d.state_at(seq, hv, i_t / d.C), j, d.K, d.V, lane);
    const T* qt = in.q + d.qk(t, h);
    const T* kt = in.k + d.qk(t, h);
    const int64_t gi = d.gate(t, hv);
    const A alpha = acc_exp(to_acc(in.g[gi]));
    A kr[kRowsPerLane];
    A dot = 0;  // (alpha S)[:, j] . k
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      const int64_t a = lane + 32 * i;
      kr[i] = a < d.K ? to_acc(kt[a]) : A(0);
      S[i] *= alpha;
      if constexpr (!kSsd) dot += kr[i] * S[i];
    }
    A u = to_acc(in.v[d.vo(t, hv) + j]);
    if constexpr (!kSsd) u = to_acc(in.beta[gi]) * (u - warp_sum(dot));
    const A out = update_state_column(S, kr, u, qt, scale, d.K, lane);
    if (lane == 0) o[d.vo(t, hv) + j] = from_acc<T>(out);
  }
  if (ht) store_state_column(S, ht + s * KV, j, d.K, d.V, lane);
}

// The backward of key head h of sequence `seq` (n its index) with the block's scratch at ws.
template <typename T>
__device__ __forceinline__ void backward_key_slice(const Dims& d, const Inputs<T>& in,
                                                   const BackwardArgs<T>& args,
                                                   const RecurrentBackwardLayout& L, acc_t<T>* ws,
                                                   int64_t n, const cuda_seqs::SeqSpan& seq,
                                                   int64_t h) {
  using A = acc_t<T>;
  __shared__ A q[kMaxK], k[kMaxK], vr[kMaxV], d_o[kMaxV], du[kMaxV], dr[kMaxV];
  __shared__ A red[kBwdThreads];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t K = d.K, V = d.V, KV = K * V, C = d.C, NT = cuda_seqs::chunks_of(seq.len, C);
  const A scale = A(d.scale);
  A *states = ws + L.states, *dS = ws + L.dS, *dq = ws + L.dq, *dk = ws + L.dk;
  for (int64_t e = tid; e < seq.len * K; e += blockDim.x) dq[e] = dk[e] = A(0);
  __syncthreads();
  for (int64_t hv = h * d.G; hv < (h + 1) * d.G; ++hv) {
    const int64_t s = n * d.HV + hv;  // the row of h0, ht, dht, dh0
    for (int64_t e = tid; e < KV; e += blockDim.x) dS[e] = args.dht ? args.dht[s * KV + e] : A(0);
    __syncthreads();
    for (int64_t c = NT - 1; c >= 0; --c) {
      const int64_t t0 = c * C, len = min(C, seq.len - t0);  // in the sequence
      const A* S0 = args.residual + d.state_at(seq, hv, c);
      // Recompute states[i] = S after step t0 + i (column j by thread j).
      for (int64_t j = tid; j < V; j += blockDim.x) {
        for (int64_t i = 0; i < len; ++i) {
          const int64_t t = seq.t0 + t0 + i, gi = d.gate(t, hv);
          const A* prev = i == 0 ? S0 : states + (i - 1) * KV;
          A* cur = states + i * KV;
          const T* kt = in.k + d.qk(t, h);
          const A alpha = acc_exp(to_acc(in.g[gi]));
          A r = 0;
          for (int64_t a = 0; a < K; ++a) {
            const A x = alpha * prev[a * V + j];
            cur[a * V + j] = x;
            r += to_acc(kt[a]) * x;
          }
          const A u = to_acc(in.beta[gi]) * (to_acc(in.v[d.vo(t, hv) + j]) - r);
          for (int64_t a = 0; a < K; ++a) cur[a * V + j] += to_acc(kt[a]) * u;
        }
      }
      __syncthreads();
      for (int64_t i = len - 1; i >= 0; --i) {
        const int64_t tl = t0 + i, t = seq.t0 + tl, gi = d.gate(t, hv);  // tl: in the sequence
        const A* Sp = i == 0 ? S0 : states + (i - 1) * KV;
        const A* St = states + i * KV;
        const A alpha = acc_exp(to_acc(in.g[gi])), beta = to_acc(in.beta[gi]);
        for (int64_t a = tid; a < K; a += blockDim.x) {
          q[a] = scale * to_acc(in.q[d.qk(t, h) + a]);
          k[a] = to_acc(in.k[d.qk(t, h) + a]);
        }
        for (int64_t j = tid; j < V; j += blockDim.x) {
          vr[j] = to_acc(in.v[d.vo(t, hv) + j]);
          d_o[j] = to_acc(args.d_o[d.vo(t, hv) + j]);
        }
        __syncthreads();
        // dq += scale S_t do (rows);  dS += q do^T;  vr = v - (alpha S_prev)^T k (columns)
        for (int64_t a = warp; a < K; a += kBwdWarps) {
          const A part = warp_dot(St + a * V, d_o, V, lane);
          if (lane == 0) dq[tl * K + a] += scale * part;
        }
        for (int64_t e = tid; e < KV; e += blockDim.x) dS[e] += q[e / V] * d_o[e % V];
        for (int64_t j = tid; j < V; j += blockDim.x) {
          A r = 0;
          for (int64_t a = 0; a < K; ++a) r += alpha * k[a] * Sp[a * V + j];
          vr[j] -= r;
        }
        __syncthreads();
        // dk += beta dS (v - r) (rows);  du = dS^T k (columns)
        for (int64_t a = warp; a < K; a += kBwdWarps) {
          const A part = warp_dot(dS + a * V, vr, V, lane);
          if (lane == 0) dk[tl * K + a] += beta * part;
        }
        for (int64_t j = tid; j < V; j += blockDim.x) {
          A acc = 0;
          for (int64_t a = 0; a < K; ++a) acc += k[a] * dS[a * V + j];
          du[j] = acc;
        }
        __syncthreads();
        // dbeta = du . (v - r);  dv = beta du;  dr = -beta du
        A part = 0;
        for (int64_t j = tid; j < V; j += blockDim.x) {
          part += du[j] * vr[j];
          dr[j] = -beta * du[j];
          args.dv[d.vo(t, hv) + j] = from_acc<T>(beta * du[j]);
        }
        const A dbeta = block_sum(part, red);  // its barriers also publish dr
        if (tid == 0) args.dbeta[gi] = from_acc<T>(dbeta);
        // dk += alpha S_prev dr (rows);  dS += k dr^T, dg = alpha <S_prev, dS>, dS *= alpha
        for (int64_t a = warp; a < K; a += kBwdWarps) {
          const A p = warp_dot(Sp + a * V, dr, V, lane);
          if (lane == 0) dk[tl * K + a] += alpha * p;
        }
        A gpart = 0;
        for (int64_t e = tid; e < KV; e += blockDim.x) {
          const A x = dS[e] + k[e / V] * dr[e % V];
          gpart += alpha * Sp[e] * x;
          dS[e] = alpha * x;
        }
        const A dg = block_sum(gpart, red);  // also the barrier before the next step
        if (tid == 0) args.dg[gi] = from_acc<T>(dg);
      }
    }
    if (args.dh0)
      for (int64_t e = tid; e < KV; e += blockDim.x) args.dh0[s * KV + e] = dS[e];
    __syncthreads();
  }
  for (int64_t e = tid; e < seq.len * K; e += blockDim.x) {
    const int64_t t = seq.t0 + e / K, a = e % K;
    args.dq[d.qk(t, h) + a] = from_acc<T>(dq[e]);
    args.dk[d.qk(t, h) + a] = from_acc<T>(dk[e]);
  }
  __syncthreads();  // the next pair this block takes zeroes dq, dk again
}

// Block x takes the (sequence, key head) pairs x, x + gridDim.x, ... (one pair unpacked). One
// resident block per multiprocessor is enough (a block per pair, or the bounded slots): without
// saying so, ptxas for sm_90 held the loop over pairs to 80 registers and spilled.
template <typename T>
__global__ void __launch_bounds__(kBwdThreads, 1)
    backward_kernel(Dims d, Inputs<T> in, BackwardArgs<T> args, RecurrentBackwardLayout L) {
  acc_t<T>* ws = args.workspace + blockIdx.x * L.used;
  for (int64_t kh = blockIdx.x; kh < d.seqs.n * d.H; kh += gridDim.x) {
    const int64_t n = kh / d.H;
    backward_key_slice<T>(d, in, args, L, ws, n, d.seqs.at(n), kh % d.H);
  }
}

}  // namespace

// Without packing the table is null and the workspace empty (the kernels compute the spans).
template <typename T>
void recurrent_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                       bool ssd, cudaStream_t stream) {
  const Dims d = dims_of(p, upload_seq_table(p, out.workspace, stream));
  const dim3 grid(unsigned(p.num_seqs() * p.HV), unsigned((p.V + kWarps - 1) / kWarps));
  if (ssd)
    forward_kernel<T, true><<<grid, kWarps * 32, 0, stream>>>(d, in, out.o, out.ht, out.residual);
  else
    forward_kernel<T, false><<<grid, kWarps * 32, 0, stream>>>(d, in, out.o, out.ht, out.residual);
  GDN_KCUDA_LAUNCHED("gdr recurrent forward");
}

// The workspace: backward_slots(p) scratch slices, then a packed Problem's table.
template <typename T>
void recurrent_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                        cudaStream_t stream) {
  const RecurrentBackwardLayout L = recurrent_backward_layout(p);
  const int64_t slots = backward_slots(p);
  const Dims d = dims_of(
      p, upload_seq_table(p, args.workspace + cuda_seqs::seq_table_offset(slots * L.used), stream));
  backward_kernel<T><<<unsigned(slots), kBwdThreads, 0, stream>>>(d, in, args, L);
  GDN_KCUDA_LAUNCHED("gdr recurrent backward");
}

int64_t recurrent_forward_workspace(const Problem& p) {
  return cuda_seqs::with_seq_table(p, 0);
}

int64_t recurrent_backward_workspace(const Problem& p) {
  return cuda_seqs::with_seq_table(p, backward_slots(p) * recurrent_backward_layout(p).used);
}

GDN_GDR_CUDA_INSTANTIATE_FWD(recurrent_forward, bool, cudaStream_t)
GDN_GDR_CUDA_INSTANTIATE_BWD(recurrent_backward)

}  // namespace gdn::gdr::cuda_detail
