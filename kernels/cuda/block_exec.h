// A thread block as a sequence of phases, written once for the GPU and for a CPU emulator, and
// the block-wide GEMM over shared-memory operands that the fused kernels are built from.
//
// A fused kernel is a series of phases separated by barriers. Inside a phase every thread (or
// warp) writes only what it owns and reads nothing another thread writes in the same phase, so
// the threads can run in any order. On the GPU each thread runs its own part
// (BlockExec::device(): the range {threadIdx.x}); on the CPU the emulator runs the whole block,
// thread by thread, in a chosen order (BlockExec::host: forward or reversed; a result that
// depends on the order betrays a race). The CPU tests (tests/test_fused_emulation.cpp) thereby
// run the GPU's own index arithmetic, tiling and tensor-core fragment code.
//
// block_gemm computes C (M x N) = A (M x K) B (K x N) and hands every element to an epilogue
// functor epi(i, j, acc) exactly once. Operands are functors a(i, l), b(l, j) returning the
// accumulator type, so transposes, row scales and concatenated contractions cost no copies.
//   Simt: one thread per output element, the dot product summed in index order (fp32 or fp64).
//   Mma:  bf16 tensor cores (mma.sync.m16n8k16, fp32 accumulation): operands are rounded to
//         bf16 (round to nearest even) when loaded into fragments; one warp per strip of up to
//         four 16 x 8 tiles side by side (sharing the A fragments).
// Operands kept in bf16 row-major (RowsOf) or transposed (ColsOf) hand the tensor cores two
// consecutive contraction elements as one 32-bit word (kpair), with no conversion or rounding.
// M, N and K are multiples of 16 (8 for N) on the Mma path. An optional span functor
// span(i_lo, i_hi, j_lo, j_hi) -> KSpan bounds the contraction a block of outputs needs (rows
// i_lo..i_hi, columns j_lo..j_hi inclusive: a 16 x 8 tile, or one element on Simt) where the
// operands are known zero outside it (triangular factors); an empty span gives acc = 0.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/numeric.h"

#if defined(__CUDA_ARCH__)
#define GDN_DEVICE_SYNC() __syncthreads()
#else
#define GDN_DEVICE_SYNC() ((void)0)
#endif

namespace gdn::cuda {

// The threads (and warps) a caller runs in a phase: on the GPU only its own, on the CPU all of
// them, in the order first, first + step, ... (end excluded).
struct BlockExec {
  int threads = 0;  // blockDim.x, a multiple of 32
  int first = 0, end = 0, step = 1;

#if defined(__CUDACC__)
  __device__ static BlockExec device() {
    const int t = int(threadIdx.x);
    return BlockExec{int(blockDim.x), t, t + 1, 1};
  }
#endif
  // The CPU emulator: every thread, forward or in reverse.
  static BlockExec host(int threads, bool reversed) {
    return reversed ? BlockExec{threads, threads - 1, -1, -1} : BlockExec{threads, 0, threads, 1};
  }
  GDN_HD int warps() const {
    return threads / 32;
  }
  // The barrier between phases (nothing on the CPU, where phases run one after another).
  GDN_HD void sync() const {
    GDN_DEVICE_SYNC();
  }

  // Blocks that hand results to each other (one waits for a flag another releases) take their
  // work by ticket, not by blockIdx: tickets are numbered in the order blocks start, so a block
  // that waits only for smaller tickets waits for blocks already running, and cannot deadlock
  // whatever order the GPU schedules blocks in. Thread 0 draws from *counter (zero at launch);
  // `slot` (shared memory) hands the ticket to the other threads. The emulator draws in turn.
  GDN_HD int claim_ticket(int* counter, int* slot) const {
#if defined(__CUDA_ARCH__)
    if (threadIdx.x == 0) *slot = atomicAdd(counter, 1);
    __syncthreads();
    return *slot;
#else
    (void)slot;
    return (*counter)++;
#endif
  }
  // Waits until *flag == value (then a barrier): what the block that set it wrote before its
  // release is visible to every thread here, read through load_coherent. In the emulator, where
  // blocks run one after another, a flag not yet set is the GPU's deadlock and throws.
  // On the GPU a wait of over 2^35 cycles (about 20 s; a real one lasts microseconds) is a logic
  // error: it traps (the launch fails with an illegal-instruction error) rather than hang.
  GDN_HD void wait_for(const int* flag, int value) const {
#if defined(__CUDA_ARCH__)
    if (threadIdx.x == 0) {
      const long long start = clock64();
      while (*reinterpret_cast<const volatile int*>(flag) != value) {
        if (clock64() - start > (1ll << 35)) __trap();
        __nanosleep(64);
      }
      __threadfence();
    }
    __syncthreads();
#else
    if (*flag != value)
      throw std::logic_error("block waits for flag value " + std::to_string(value) + ", has " +
                             std::to_string(*flag) + ": no earlier block releases it");
#endif
  }
  // Sets *flag = value once every thread's global writes are visible device-wide (a barrier too):
  // the barrier orders the block's writes before thread 0, whose fence then releases them all
  // (the pattern of cooperative groups' grid sync).
  GDN_HD void release(int* flag, int value) const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      atomicExch(flag, value);
    }
#else
    *flag = value;
#endif
  }
};

// Global memory another block wrote (released through BlockExec::release): read past the
// multiprocessor's L1, which is not coherent across blocks.
template <typename A>
GDN_HD A load_coherent(const A* p) {
#if defined(__CUDA_ARCH__)
  return __ldcg(p);
#else
  return *p;
#endif
}

// for (tid ...) over the threads this caller runs.
#define GDN_EACH_THREAD(ex, tid) for (int tid = (ex).first; tid != (ex).end; tid += (ex).step)
// for (warp ...) over the warps this caller runs (on the GPU: its own warp, all lanes together).
#if defined(__CUDA_ARCH__)
#define GDN_EACH_WARP(ex, warp) for (int warp = (ex).first / 32; warp == (ex).first / 32; ++warp)
#else
#define GDN_EACH_WARP(ex, warp)                                                           \
  for (int warp = (ex).step > 0 ? 0 : (ex).warps() - 1; warp >= 0 && warp < (ex).warps(); \
       warp += (ex).step)
#endif

// exp on either side (exponents here are <= 0).
GDN_HD float hd_exp(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}
GDN_HD double hd_exp(double x) {
#if defined(__CUDA_ARCH__)
  return exp(x);
#else
  return std::exp(x);
#endif
}

struct Simt {};
struct Mma {};

// A contraction range [begin, end).
struct KSpan {
  int begin, end;
};
// The whole contraction.
struct FullSpan {
  int K;
  GDN_HD KSpan operator()(int, int, int, int) const { return KSpan{0, K}; }
};

// ---- the Simt path --------------------------------------------------------------------------

template <typename Acc, class Exec, class Aop, class Bop, class Epi, class Span>
GDN_HD void block_gemm(Simt, const Exec& ex, int M, int N, int K, const Aop& a, const Bop& b,
                       const Epi& epi, const Span& span) {
  GDN_EACH_THREAD(ex, tid) {
    for (int idx = tid; idx < M * N; idx += ex.threads) {
      const int i = idx / N, j = idx % N;
      const KSpan s = span(i, i, j, j);
      Acc acc = 0;
      for (int l = s.begin < 0 ? 0 : s.begin; l < s.end && l < K; ++l) acc += a(i, l) * b(l, j);
      epi(i, j, acc);
    }
  }
}

// ---- the Mma path: fragments of mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 ----------
// Lane l, g = l / 4, t = l % 4 (PTX ISA, "Matrix fragments for mma.m16n8k16"); each 32-bit word
// holds two bf16, the lower column (or row) index in the low half:
//   A (16 x 16): word 0 (g, 2t..2t+1), 1 (g+8, 2t..), 2 (g, 2t+8..), 3 (g+8, 2t+8..)
//   B (16 x 8):  word 0 (rows 2t..2t+1, col g), 1 (rows 2t+8..2t+9, col g)
//   C (16 x 8):  c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1)

GDN_HD uint32_t pack_bf16x2(float lo, float hi) {
  return uint32_t(bf16::from_float(lo)) | (uint32_t(bf16::from_float(hi)) << 16);
}
GDN_HD float bf16_lo(uint32_t w) {
  return bits_float(w << 16);
}
GDN_HD float bf16_hi(uint32_t w) {
  return bits_float(w & 0xffff0000u);
}

// Two bf16 at p (4-byte aligned) as one word, p[0] in the low half.
GDN_HD uint32_t load_bf16x2(const bf16* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t w;
  std::memcpy(&w, p, sizeof(w));
  return w;
#endif
}

// An operand over values stored in E with leading dimension ld (even, and p 4-byte aligned for
// bf16), contiguous along the contraction index l, so bf16 pairs (l, l + 1) load as one word:
// as an A operand x(i, l) = p[i ld + l] (RowsOf), as a B operand x(l, j) = p[j ld + l] (ColsOf,
// a transposed matrix).
template <typename Acc, typename E, bool kIsB>
struct ContractionMajor {
  const E* p;
  int ld;
  GDN_HD const E* at(int x, int y) const { return kIsB ? p + y * ld + x : p + x * ld + y; }
  GDN_HD Acc operator()(int x, int y) const { return Acc(*at(x, y)); }
  GDN_HD uint32_t kpair(int x, int y) const { return load_bf16x2(at(x, y)); }
};
template <typename Acc, typename E>
using RowsOf = ContractionMajor<Acc, E, false>;
template <typename Acc, typename E>
using ColsOf = ContractionMajor<Acc, E, true>;

// Whether an operand hands out bf16 pairs along the contraction (RowsOf / ColsOf over bf16).
template <class Op>
struct HasKPair : std::false_type {};
template <typename Acc, bool kIsB>
struct HasKPair<ContractionMajor<Acc, bf16, kIsB>> : std::true_type {};

// The A words of lane `lane` for the tile at rows i0.., columns k0.. of a(i, l).
template <class Aop>
GDN_HD void load_a_fragment(int lane, const Aop& a, int i0, int k0, uint32_t (&w)[4]) {
  const int g = lane >> 2, c = k0 + 2 * (lane & 3);
  if constexpr (HasKPair<Aop>::value) {
    w[0] = a.kpair(i0 + g, c);
    w[1] = a.kpair(i0 + g + 8, c);
    w[2] = a.kpair(i0 + g, c + 8);
    w[3] = a.kpair(i0 + g + 8, c + 8);
  } else {
    w[0] = pack_bf16x2(float(a(i0 + g, c)), float(a(i0 + g, c + 1)));
    w[1] = pack_bf16x2(float(a(i0 + g + 8, c)), float(a(i0 + g + 8, c + 1)));
    w[2] = pack_bf16x2(float(a(i0 + g, c + 8)), float(a(i0 + g, c + 9)));
    w[3] = pack_bf16x2(float(a(i0 + g + 8, c + 8)), float(a(i0 + g + 8, c + 9)));
  }
}

// The B words of lane `lane` for the tile at rows k0.., columns j0.. of b(l, j).
template <class Bop>
GDN_HD void load_b_fragment(int lane, const Bop& b, int k0, int j0, uint32_t (&w)[2]) {
  const int n = j0 + (lane >> 2), r = k0 + 2 * (lane & 3);
  if constexpr (HasKPair<Bop>::value) {
    w[0] = b.kpair(r, n);
    w[1] = b.kpair(r + 8, n);
  } else {
    w[0] = pack_bf16x2(float(b(r, n)), float(b(r + 1, n)));
    w[1] = pack_bf16x2(float(b(r + 8, n)), float(b(r + 9, n)));
  }
}

// Row and column of accumulator element e (0..3) of lane `lane`, relative to the tile.
GDN_HD int acc_row(int lane, int e) {
  return (lane >> 2) + 8 * (e >> 1);
}
GDN_HD int acc_col(int lane, int e) {
  return 2 * (lane & 3) + (e & 1);
}

// What mma.sync computes, from the 32 lanes' fragments: d += A B (fp32 sums in k order).
GDN_HD void emulate_mma_m16n8k16(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2],
                                 float (&d)[32][4]) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, c = 2 * (lane & 3);
    const int ar[4] = {g, g + 8, g, g + 8}, ac[4] = {c, c, c + 8, c + 8};
    for (int w = 0; w < 4; ++w) {
      A[ar[w]][ac[w]] = bf16_lo(a[lane][w]);
      A[ar[w]][ac[w] + 1] = bf16_hi(a[lane][w]);
    }
    for (int w = 0; w < 2; ++w) {
      B[c + 8 * w][g] = bf16_lo(b[lane][w]);
      B[c + 8 * w + 1][g] = bf16_hi(b[lane][w]);
    }
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 4; ++e) {
      float acc = d[lane][e];
      for (int k = 0; k < 16; ++k) acc += A[acc_row(lane, e)][k] * B[k][acc_col(lane, e)];
      d[lane][e] = acc;
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ void mma_m16n8k16(const uint32_t (&a)[4], const uint32_t (&b)[2],
                                             float (&d)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

// One strip of NS 16 x 8 output tiles at (i0, j0 + 8 s), by one warp, over the contraction
// [k_begin, k_end) (multiples of 16): each A fragment is loaded once for the NS products.
template <int NS, class Aop, class Bop, class Epi>
GDN_HD void warp_strip(int i0, int j0, int k_begin, int k_end, const Aop& a, const Bop& b,
                       const Epi& epi) {
#if defined(__CUDA_ARCH__)
  const int lane = int(threadIdx.x & 31);
  float d[NS][4] = {};
#if __CUDA_ARCH__ >= 800
  for (int k0 = k_begin; k0 < k_end; k0 += 16) {
    uint32_t wa[4];
    load_a_fragment(lane, a, i0, k0, wa);
#pragma unroll
    for (int s = 0; s < NS; ++s) {
      uint32_t wb[2];
      load_b_fragment(lane, b, k0, j0 + 8 * s, wb);
      mma_m16n8k16(wa, wb, d[s]);
    }
  }
#else  // no bf16 tensor cores: the same products, lane by lane, from the same rounded operands
  for (int s = 0; s < NS; ++s)
    for (int e = 0; e < 4; ++e)
      for (int l = k_begin; l < k_end; ++l)
        d[s][e] += bf16_lo(pack_bf16x2(float(a(i0 + acc_row(lane, e), l)), 0.f)) *
                   bf16_lo(pack_bf16x2(float(b(l, j0 + 8 * s + acc_col(lane, e))), 0.f));
#endif
#pragma unroll
  for (int s = 0; s < NS; ++s)
    for (int e = 0; e < 4; ++e) epi(i0 + acc_row(lane, e), j0 + 8 * s + acc_col(lane, e), d[s][e]);
#else
  float d[NS][32][4] = {};
  for (int k0 = k_begin; k0 < k_end; k0 += 16) {
    uint32_t wa[32][4], wb[32][2];
    for (int lane = 0; lane < 32; ++lane) load_a_fragment(lane, a, i0, k0, wa[lane]);
    for (int s = 0; s < NS; ++s) {
      for (int lane = 0; lane < 32; ++lane) load_b_fragment(lane, b, k0, j0 + 8 * s, wb[lane]);
      emulate_mma_m16n8k16(wa, wb, d[s]);
    }
  }
  for (int s = 0; s < NS; ++s)
    for (int lane = 0; lane < 32; ++lane)
      for (int e = 0; e < 4; ++e)
        epi(i0 + acc_row(lane, e), j0 + 8 * s + acc_col(lane, e), d[s][lane][e]);
#endif
}

// Tiles per warp strip: the widest of 4, 2, 1 that divides the columns' tiles and still gives
// every warp a strip.
GDN_HD int strip_tiles(int M, int N, int warps) {
  for (int ns = 4; ns > 1; ns /= 2)
    if ((N / 8) % ns == 0 && (M / 16) * (N / 8 / ns) >= warps) return ns;
  return 1;
}

template <typename Acc, class Exec, class Aop, class Bop, class Epi, class Span>
GDN_HD void block_gemm(Mma, const Exec& ex, int M, int N, int K, const Aop& a, const Bop& b,
                       const Epi& epi, const Span& span) {
  const int ns = strip_tiles(M, N, ex.warps());
  const int strips_n = N / (8 * ns), strips = (M / 16) * strips_n;
  GDN_EACH_WARP(ex, warp) {
    for (int strip = warp; strip < strips; strip += ex.warps()) {
      const int i0 = (strip / strips_n) * 16, j0 = (strip % strips_n) * 8 * ns;
      const KSpan s = span(i0, i0 + 15, j0, j0 + 8 * ns - 1);
      const int begin = s.begin < 0 ? 0 : s.begin / 16 * 16;  // whole k-steps
      const int end = s.end > K ? K : (s.end + 15) / 16 * 16;
      const int stop = end < begin ? begin : end;
      if (ns == 4) {
        warp_strip<4>(i0, j0, begin, stop, a, b, epi);
      } else if (ns == 2) {
        warp_strip<2>(i0, j0, begin, stop, a, b, epi);
      } else {
        warp_strip<1>(i0, j0, begin, stop, a, b, epi);
      }
    }
  }
}

// Without a span: the whole contraction.
template <typename Acc, class PathT, class Exec, class Aop, class Bop, class Epi>
GDN_HD void block_gemm(PathT path, const Exec& ex, int M, int N, int K, const Aop& a, const Bop& b,
                       const Epi& epi) {
  block_gemm<Acc>(path, ex, M, N, K, a, b, epi, FullSpan{K});
}

// The path for an input type: tensor cores for bf16, exact fp32 / fp64 arithmetic otherwise.
template <typename T>
struct GemmPath {
  using type = Simt;
};
template <>
struct GemmPath<bf16> {
  using type = Mma;
};

}  // namespace gdn::cuda
