// Causal softmax attention on CUDA (kernels/cuda/attention_cuda.h), FlashAttention-2 style, SIMT
// math in the accumulator type A (fp32; fp64 for double). The plan (tile size bt, shared memory
// layout, tile table, visibility) is kernels/cuda/attention_plan.h, checked on the CPU.
//
// Forward: one block per (query tile, query head), grid (tiles, H). Per key tile it sees:
//   S = scale Q K^T (masked),  m' = max(m, rowmax S),  P = exp(S - m') (0 where masked),
//   l = l e^{m - m'} + rowsum P,  O = O e^{m - m'} + P V;  at the end o = O / l, lse = m + log l.
// Backward, with Delta_t = do_t . o_t:
//   P = exp(scale Q K^T - lse),  dV = P^T dO,  dP = dO V^T,  dS = P o (dP - Delta),
//   dK = scale dS^T Q,  dQ = scale dS K.
// Three kernels: Delta (one warp per (token, head)); dK/dV, one block per (key tile, kv head),
// summing over the group's query heads and, in order, the query tiles that see the key tile; dQ,
// one block per (query tile, query head), summing over its key tiles. Each output element is
// summed by one thread in a fixed order (no atomics): the same input gives the same bits.
//
// Shared memory (acc type): four [bt, D + 1] tiles, two [bt, bt + 1] score tiles and two bt row
// statistics (attention_plan.h); the output accumulators live in registers, kMaxPerThread per
// thread (element e = threadIdx.x + j kThreads of the [rows, D] tile, j < kMaxPerThread).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/device_util.cuh"

namespace gdn::attn {

namespace {

using namespace cuda_plan;
using gdn::cuda::acc_exp;
using gdn::cuda::acc_log;
using gdn::cuda::warp_sum;

template <typename T>
struct Args {
  const T *q, *k, *v, *o, *d_o;
  T *out_o, *dq, *dk, *dv;
  acc_t<T>* lse;  // forward: written; backward: read
  acc_t<T>* delta;
  int64_t T_, H, HKV, D, group, window;
  acc_t<T> scale;
  int64_t bt;
  Layout l;
  TileTable tiles;
};

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) {
  return a < b ? a : b;
}

template <typename A>
__device__ __forceinline__ A* shared_base() {
  extern __shared__ __align__(16) unsigned char gdn_attn_smem[];
  return reinterpret_cast<A*>(gdn_attn_smem);
}

// dst[i * ld + d] = src[i * stride + d] for i < rows, d < D, in the acc type (block-wide).
template <typename T, typename A>
__device__ __forceinline__ void load_tile(const T* src, int64_t stride, int64_t rows, int64_t D,
                                          int64_t ld, A* dst) {
  for (int64_t e = threadIdx.x; e < rows * D; e += kThreads) {
    const int64_t i = div32(e, D), d = mod32(e, D);
    dst[i * ld + d] = to_acc(src[i * stride + d]);
  }
}

// a . b over D elements (shared memory rows).
template <typename A>
__device__ __forceinline__ A dot(const A* a, const A* b, int64_t D) {
  A s = 0;
  for (int64_t d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

// Max with std::max's rule (a < b ? b : a) over the warp's lanes.
template <typename A>
__device__ __forceinline__ A warp_max(A v) {
  for (int m = 16; m > 0; m >>= 1) {
    const A o = __shfl_xor_sync(0xffffffffu, v, m);
    v = v < o ? o : v;
  }
  return v;
}

// Loads rows [tok, tok + rows) of head `head` of a [tokens, heads, D] tensor (block-wide).
template <typename T, typename A>
__device__ __forceinline__ void load_head_rows(const T* x, int64_t tok, int64_t heads, int64_t head,
                                               int64_t rows, int64_t D, int64_t ld, A* dst) {
  load_tile(x + (tok * heads + head) * D, heads * D, rows, D, ld, dst);
}

// Calls f(jj, i, d) for this thread's elements e = threadIdx.x + jj kThreads < rows D of a
// [rows, D] tile (row i, column d): the register accumulators' element map.
template <typename A, typename F>
__device__ __forceinline__ void for_own_elems(int64_t rows, int64_t D, F f) {
#pragma unroll
  for (int jj = 0; jj < kMaxPerThread<A>; ++jj) {
    const int64_t e = threadIdx.x + int64_t(jj) * kThreads;
    if (e < rows * D) f(jj, div32(e, D), mod32(e, D));
  }
}

// ---- forward ------------------------------------------------------------------------------------

// Shared memory: a = Q, b = K, c = V, s = S then P, t = the rescale factor per row (first bt
// elements), r0 = m (running row max), r1 = l (running row sum of exp(S - m)).
template <typename T>
__global__ void __launch_bounds__(kThreads, 1) forward_kernel(const Args<T> a) {
  using A = acc_t<T>;
  A* sm = shared_base<A>();
  const Layout& L = a.l;
  A *sq = sm + L.a, *sk = sm + L.b, *sv = sm + L.c, *ss = sm + L.s, *fac = sm + L.t;
  A *m = sm + L.r0, *l = sm + L.r1;
  const TileSpan ts = a.tiles.at(blockIdx.x);
  const int64_t h = blockIdx.y, kv = div32(h, a.group), D = a.D, bt = a.bt;
  const int64_t r0 = ts.start, br = imin(bt, ts.len - r0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  load_head_rows(a.q, ts.tok0 + r0, a.H, h, br, D, L.ld, sq);
  if (threadIdx.x < br) {
    m[threadIdx.x] = -std::numeric_limits<A>::infinity();
    l[threadIdx.x] = 0;
  }
  A acc[kMaxPerThread<A>] = {};

  const TileRange keys = key_tiles_seen(a.window, bt, r0, br);
  for (int64_t c = keys.first; c <= keys.last; ++c) {
    const int64_t c0 = c * bt, bc = imin(bt, ts.len - c0);
    __syncthreads();  // the previous key tile's K, V, P are no longer read
    load_head_rows(a.k, ts.tok0 + c0, a.HKV, kv, bc, D, L.ld, sk);
    load_head_rows(a.v, ts.tok0 + c0, a.HKV, kv, bc, D, L.ld, sv);
    __syncthreads();
    // S_ij = scale q_i . k_j where query r0 + i sees key c0 + j (other entries are not read).
    for (int64_t e = threadIdx.x; e < br * bt; e += kThreads) {
      const int64_t i = div32(e, bt), j = mod32(e, bt);
      if (j < bc && visible(a.window, r0 + i, c0 + j))
        ss[i * L.lds + j] = a.scale * dot(sq + i * L.ld, sk + j * L.ld, D);
    }
    __syncthreads();
    // Online softmax, one warp per row: m' = max(m, max_j S_ij) over the visible j, P_ij =
    // exp(S_ij - m') there and 0 elsewhere, l = l f + sum_j P_ij with f = e^{m - m'} (1 when m
    // is unchanged, so a row that has seen no key keeps m = -inf, l = 0 without exp(-inf + inf)).
    for (int64_t i = warp; i < br; i += kThreads / 32) {
      A mx = m[i];
      for (int64_t j = lane; j < bc; j += 32)
        if (visible(a.window, r0 + i, c0 + j)) {
          const A s = ss[i * L.lds + j];
          mx = mx < s ? s : mx;
        }
      mx = warp_max(mx);
      A sum = 0;
      for (int64_t j = lane; j < bt; j += 32) {
        const bool seen = j < bc && visible(a.window, r0 + i, c0 + j);
        const A p = seen ? acc_exp(ss[i * L.lds + j] - mx) : A(0);
        ss[i * L.lds + j] = p;
        sum += p;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        const A f = mx == m[i] ? A(1) : acc_exp(m[i] - mx);
        fac[i] = f;
        l[i] = l[i] * f + sum;
        m[i] = mx;
      }
    }
    __syncthreads();
    // O_id = O_id f_i + sum_j P_ij V_jd.
    for_own_elems<A>(br, D, [&](int jj, int64_t i, int64_t d) {
      A o = acc[jj] * fac[i];
      for (int64_t j = 0; j < bc; ++j) o += ss[i * L.lds + j] * sv[j * L.ld + d];
      acc[jj] = o;
    });
  }
  // m and l are final (written before the last barrier). Each query sees itself, so l > 0.
  for_own_elems<A>(br, D, [&](int jj, int64_t i, int64_t d) {
    a.out_o[((ts.tok0 + r0 + i) * a.H + h) * D + d] = from_acc<T>((A(1) / l[i]) * acc[jj]);
  });
  if (threadIdx.x < br) {
    const int64_t i = threadIdx.x;
    a.lse[stat_index(a.T_, a.H, ts.tok0 + r0 + i, h)] = m[i] + acc_log(l[i]);
  }
}

// ---- backward -----------------------------------------------------------------------------------

// Delta_t = do_t . o_t per (token, query head), one warp each, in lse's [B, H, T] layout.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1) delta_kernel(const Args<T> a, int64_t rows) {
  using A = acc_t<T>;
  const int64_t r = blockIdx.x * int64_t(kThreads / 32) + threadIdx.x / 32;
  if (r >= rows) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  const T* o = a.o + r * a.D;
  const T* g = a.d_o + r * a.D;
  A s = 0;
  for (int64_t d = lane; d < a.D; d += 32) s += to_acc(o[d]) * to_acc(g[d]);
  s = warp_sum(s);
  if (lane == 0) a.delta[stat_index(a.T_, a.H, div32(r, a.H), mod32(r, a.H))] = s;
}

// For queries r0 + i (i < br) and keys c0 + j (j < bc) with Q (sq), dO (sdo), K (sk), V (sv),
// lse (slse) and Delta (sdelta) in shared memory: P (sp, when given) and dS (sds), 0 where masked,
// for every i < br, j < bt.
template <typename A>
__device__ __forceinline__ void probs_and_score_grads(const Layout& L, int64_t window, A scale,
                                                      int64_t D, int64_t bt, int64_t r0, int64_t br,
                                                      int64_t c0, int64_t bc, const A* sq,
                                                      const A* sdo, const A* sk, const A* sv,
                                                      const A* slse, const A* sdelta, A* sp,
                                                      A* sds) {
  for (int64_t e = threadIdx.x; e < br * bt; e += kThreads) {
    const int64_t i = div32(e, bt), j = mod32(e, bt);
    A p = 0, ds = 0;
    if (j < bc && visible(window, r0 + i, c0 + j)) {
      p = acc_exp(scale * dot(sq + i * L.ld, sk + j * L.ld, D) - slse[i]);
      ds = p * (dot(sdo + i * L.ld, sv + j * L.ld, D) - sdelta[i]);
    }
    if (sp) sp[i * L.lds + j] = p;
    sds[i * L.lds + j] = ds;
  }
}

// Loads lse and Delta of rows [tok, tok + rows) of head h (threads < rows).
template <typename T>
__device__ __forceinline__ void load_stats(const Args<T>& a, int64_t tok, int64_t rows, int64_t h,
                                           acc_t<T>* slse, acc_t<T>* sdelta) {
  if (threadIdx.x < rows) {
    const int64_t idx = stat_index(a.T_, a.H, tok + threadIdx.x, h);
    slse[threadIdx.x] = a.lse[idx];
    sdelta[threadIdx.x] = a.delta[idx];
  }
}

// dK, dV of one key tile of one kv head. Shared memory: a = K, b = V, c = Q, d = dO, s = P,
// t = dS, r0 = lse, r1 = Delta.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1) dkdv_kernel(const Args<T> a) {
  using A = acc_t<T>;
  A* sm = shared_base<A>();
  const Layout& L = a.l;
  A *sk = sm + L.a, *sv = sm + L.b, *sq = sm + L.c, *sdo = sm + L.d, *sp = sm + L.s;
  A *sds = sm + L.t, *slse = sm + L.r0, *sdelta = sm + L.r1;
  const TileSpan ts = a.tiles.at(blockIdx.x);
  const int64_t kv = blockIdx.y, D = a.D, bt = a.bt;
  const int64_t c0 = ts.start, bc = imin(bt, ts.len - c0);

  load_head_rows(a.k, ts.tok0 + c0, a.HKV, kv, bc, D, L.ld, sk);
  load_head_rows(a.v, ts.tok0 + c0, a.HKV, kv, bc, D, L.ld, sv);
  A dk[kMaxPerThread<A>] = {}, dv[kMaxPerThread<A>] = {};

  const TileRange queries = query_tiles_seeing(a.window, bt, c0, bc, ts.len);
  for (int64_t h = kv * a.group; h < (kv + 1) * a.group; ++h)
    for (int64_t r = queries.first; r <= queries.last; ++r) {
      const int64_t r0 = r * bt, br = imin(bt, ts.len - r0);
      __syncthreads();  // the previous query tile's Q, dO, P, dS are no longer read
      load_head_rows(a.q, ts.tok0 + r0, a.H, h, br, D, L.ld, sq);
      load_head_rows(a.d_o, ts.tok0 + r0, a.H, h, br, D, L.ld, sdo);
      load_stats(a, ts.tok0 + r0, br, h, slse, sdelta);
      __syncthreads();
      probs_and_score_grads(L, a.window, a.scale, D, bt, r0, br, c0, bc, sq, sdo, sk, sv, slse,
                            sdelta, sp, sds);
      __syncthreads();
      // dV_jd += sum_i P_ij dO_id,  dK_jd += scale sum_i dS_ij Q_id.
      for_own_elems<A>(bc, D, [&](int jj, int64_t j, int64_t d) {
        A sv_acc = dv[jj], sk_acc = 0;
        for (int64_t i = 0; i < br; ++i) {
          sv_acc += sp[i * L.lds + j] * sdo[i * L.ld + d];
          sk_acc += sds[i * L.lds + j] * sq[i * L.ld + d];
        }
        dv[jj] = sv_acc;
        dk[jj] += a.scale * sk_acc;
      });
    }
  for_own_elems<A>(bc, D, [&](int jj, int64_t j, int64_t d) {
    const int64_t at = ((ts.tok0 + c0 + j) * a.HKV + kv) * D + d;
    a.dk[at] = from_acc<T>(dk[jj]);
    a.dv[at] = from_acc<T>(dv[jj]);
  });
}

// dQ of one query tile of one query head. Shared memory: a = Q, b = dO, c = K, d = V, t = dS,
// r0 = lse, r1 = Delta (s unused).
template <typename T>
__global__ void __launch_bounds__(kThreads, 1) dq_kernel(const Args<T> a) {
  using A = acc_t<T>;
  A* sm = shared_base<A>();
  const Layout& L = a.l;
  A *sq = sm + L.a, *sdo = sm + L.b, *sk = sm + L.c, *sv = sm + L.d, *sds = sm + L.t;
  A *slse = sm + L.r0, *sdelta = sm + L.r1;
  const TileSpan ts = a.tiles.at(blockIdx.x);
  const int64_t h = blockIdx.y, kv = div32(h, a.group), D = a.D, bt = a.bt;
  const int64_t r0 = ts.start, br = imin(bt, ts.len - r0);

  load_head_rows(a.q, ts.tok0 + r0, a.H, h, br, D, L.ld, sq);
  load_head_rows(a.d_o, ts.tok0 + r0, a.H, h, br, D, L.ld, sdo);
  load_stats(a, ts.tok0 + r0, br, h, slse, sdelta);
  A dq[kMaxPerThread<A>] = {};

  const TileRange keys = key_tiles_seen(a.window, bt, r0, br);
  for (int64_t c = keys.first; c <= keys.last; ++c) {
    const int64_t c0 = c * bt, bc = imin(bt, ts.len - c0);
    __syncthreads();  // the previous key tile's K, V, dS are no longer read
    load_head_rows(a.k, ts.tok0 + c0, a.HKV, kv, bc, D, L.ld, sk);
    load_head_rows(a.v, ts.tok0 + c0, a.HKV, kv, bc, D, L.ld, sv);
    __syncthreads();
    probs_and_score_grads(L, a.window, a.scale, D, bt, r0, br, c0, bc, sq, sdo, sk, sv, slse,
                          sdelta, static_cast<A*>(nullptr), sds);
    __syncthreads();
    // dQ_id += scale sum_j dS_ij K_jd.
    for_own_elems<A>(br, D, [&](int jj, int64_t i, int64_t d) {
      A s = 0;
      for (int64_t j = 0; j < bc; ++j) s += sds[i * L.lds + j] * sk[j * L.ld + d];
      dq[jj] += a.scale * s;
    });
  }
  for_own_elems<A>(br, D, [&](int jj, int64_t i, int64_t d) {
    a.dq[((ts.tok0 + r0 + i) * a.H + h) * D + d] = from_acc<T>(dq[jj]);
  });
}

// ---- host ---------------------------------------------------------------------------------------

Plan plan_of(const Problem& p, int64_t acc_bytes) {
  const Plan plan = plan_for(p.D, acc_bytes);
  if (plan.bt == 0)
    throw std::invalid_argument("attn: no CUDA tile plan for head dim D = " + std::to_string(p.D));
  return plan;
}

// The kernels' arguments (after checking p), with the tile table copied into the workspace's
// front (packed).
template <typename T>
Args<T> args_of(const Problem& p, acc_t<T>* workspace, cudaStream_t stream) {
  validate(p);
  if (!fits_int32(p))
    throw std::invalid_argument("attn: CUDA kernels need B T H < 2^31 (index math in 32 bits)");
  const Plan plan = plan_of(p, sizeof(acc_t<T>));
  Args<T> a{};
  a.T_ = p.T;
  a.H = p.H;
  a.HKV = p.HKV;
  a.D = p.D;
  a.group = p.group();
  a.window = p.window;
  a.scale = acc_t<T>(p.scale);
  a.bt = plan.bt;
  a.l = layout_of(plan.bt, p.D);
  a.tiles = TileTable{nullptr, tile_count(p, plan.bt), p.T, tiles_in(p.T, plan.bt), plan.bt};
  if (p.packed()) {
    const std::vector<TileSpan> spans = tile_spans(p, plan.bt);
    gdn::cuda::upload_async(spans.data(), spans.size() * sizeof(TileSpan), workspace, stream);
    a.tiles.spans = reinterpret_cast<const TileSpan*>(workspace);
  }
  return a;
}

// The tile table's room at the workspace's front, the larger of the fp32 and fp64 plans' tables
// (the sizes do not depend on the dtype); the backward's Delta sits behind it.
int64_t delta_offset(const Problem& p) {
  return std::max(table_elems(p, plan_of(p, 4).bt), table_elems(p, plan_of(p, 8).bt));
}

// The grid of the tile kernels: (tiles, heads).
dim3 grid_of(int64_t tiles, int64_t heads) {
  if (tiles > int64_t(0x7fffffff) || heads > 65535)
    throw std::invalid_argument("attn: too many tiles or heads for one CUDA launch");
  return dim3(unsigned(tiles), unsigned(heads));
}

}  // namespace

int64_t cuda_forward_workspace_elems(const Problem& p) {
  validate(p);
  return delta_offset(p);
}

int64_t cuda_backward_workspace_elems(const Problem& p) {
  validate(p);
  return delta_offset(p) + p.B * p.H * p.T;
}

template <typename T>
void forward_cuda(const Problem& p, const T* q, const T* k, const T* v, T* o, acc_t<T>* lse,
                  acc_t<T>* workspace, void* stream) {
  const cudaStream_t s = gdn::cuda::as_stream(stream);
  Args<T> a = args_of<T>(p, workspace, s);
  a.q = q;
  a.k = k;
  a.v = v;
  a.out_o = o;
  a.lse = lse;
  const size_t smem = size_t(a.l.elems) * sizeof(acc_t<T>);
  forward_kernel<T><<<grid_of(a.tiles.count, p.H), kThreads, smem, s>>>(a);
  GDN_KCUDA_LAUNCHED("attention forward");
}

template <typename T>
void backward_cuda(const Problem& p, const T* q, const T* k, const T* v, const T* o,
                   const acc_t<T>* lse, const T* d_o, T* dq, T* dk, T* dv, acc_t<T>* workspace,
                   void* stream) {
  const cudaStream_t s = gdn::cuda::as_stream(stream);
  Args<T> a = args_of<T>(p, workspace, s);
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = o;
  a.d_o = d_o;
  a.lse = const_cast<acc_t<T>*>(lse);  // read only in the backward
  a.delta = workspace + delta_offset(p);
  a.dq = dq;
  a.dk = dk;
  a.dv = dv;
  const int64_t rows = p.B * p.T * p.H, warps = kThreads / 32;
  delta_kernel<T><<<unsigned((rows + warps - 1) / warps), kThreads, 0, s>>>(a, rows);
  GDN_KCUDA_LAUNCHED("attention backward (Delta)");
  const size_t smem = size_t(a.l.elems) * sizeof(acc_t<T>);
  dkdv_kernel<T><<<grid_of(a.tiles.count, p.HKV), kThreads, smem, s>>>(a);
  GDN_KCUDA_LAUNCHED("attention backward (dK, dV)");
  dq_kernel<T><<<grid_of(a.tiles.count, p.H), kThreads, smem, s>>>(a);
  GDN_KCUDA_LAUNCHED("attention backward (dQ)");
}

#define GDN_ATTN_CUDA_INSTANTIATE(T)                                                         \
  template void forward_cuda<T>(const Problem&, const T*, const T*, const T*, T*, acc_t<T>*, \
                                acc_t<T>*, void*);                                           \
  template void backward_cuda<T>(const Problem&, const T*, const T*, const T*, const T*,     \
                                 const acc_t<T>*, const T*, T*, T*, T*, acc_t<T>*, void*);
GDN_ATTN_CUDA_INSTANTIATE(float)
GDN_ATTN_CUDA_INSTANTIATE(double)
GDN_ATTN_CUDA_INSTANTIATE(bf16)
#undef GDN_ATTN_CUDA_INSTANTIATE

}  // namespace gdn::attn
