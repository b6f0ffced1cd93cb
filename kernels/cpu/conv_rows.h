// The causal depthwise conv1d's loops, shared by the plain conv (nn.cpp) and the conv + SiLU
// (fused.cpp): row by row with channels innermost, so every loop runs over contiguous memory and
// vectorises. The taps come transposed ([k, c]: each tap a contiguous row of channel weights).
//   forward:   y[s, ch]  = sum_{j < k} w[ch, j] x[s - k + 1 + j, ch]      (taps before the
//                                                                          sequence start skipped)
//   dx:        dx[s, ch] = sum_{j < k} w[ch, j] dy[s + k - 1 - j, ch]     (over the outputs it fed)
//   dw:        dw[ch, j] = sum_{b, s} dy[s, ch] x[s - k + 1 + j, ch]
// Each sum runs in the order of the scalar loops it replaced (taps ascending; (b, s) ascending for
// dw), so results are the same bits, and the same for any thread count.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/parallel_rows.h"
#include "kernels/cpu/simd.h"
#include "kernels/numeric.h"
#include "kernels/trace_events.h"

namespace gdn::cpu::conv {

// The first position a tap of output s may read: its sequence's start (0 unpacked).
inline int64_t first_tap(const int64_t* seq_start, int64_t s) {
  return seq_start ? seq_start[s] : 0;
}

// wt[j * c + ch] = w[ch * k + j], in the accumulator type.
template <typename T>
std::vector<acc_t<T>> transposed_taps(const T* w, int64_t c, int64_t k) {
  std::vector<acc_t<T>> wt(size_t(c * k));
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t j = 0; j < k; ++j) wt[size_t(j * c + ch)] = to_acc(w[ch * k + j]);
  return wt;
}

// acc[0, c) = the conv at (bi, s) (output s of batch row bi; its sequence starts at lo).
template <typename T, typename A>
inline void forward_row(const T* x, const A* wt, int64_t t, int64_t c, int64_t k, int64_t bi,
                        int64_t s, int64_t lo, A* acc) {
  for (int64_t ch = 0; ch < c; ++ch) acc[ch] = A(0);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t src = s - k + 1 + j;
    if (src < lo) continue;
    const T* xr = x + (bi * t + src) * c;
    const A* wr = wt + j * c;
    for (int64_t ch = 0; ch < c; ++ch) acc[ch] += wr[ch] * to_acc(xr[ch]);
  }
}

// fn(bi, s, wt, acc) for every position s < t of every batch row bi < b (split over threads
// when `parallel`): wt the transposed taps of w, acc a thread's own buffer of c accumulators.
template <typename T, typename Fn>
void for_each_position(const T* w, int64_t b, int64_t t, int64_t c, int64_t k, bool parallel,
                       const char* name, const Fn& fn) {
  using A = acc_t<T>;
  const std::vector<A> wt = transposed_taps(w, c, k);
  parallel_rows(
      b * t, parallel, name, [c] { return std::vector<A>(size_t(c)); },
      [&](int64_t row, std::vector<A>& acc)
          GDN_ROW_INLINE { fn(row / t, row % t, wt.data(), acc.data()); });
}

// row_fn(bi, s, acc) for every output row, acc holding its conv (rows split over threads).
template <typename T, typename RowFn>
GDN_CPU_CLONES void for_each_row(const T* x, const T* w, int64_t b, int64_t t, int64_t c, int64_t k,
                                 const int64_t* seq_start, bool parallel, const RowFn& row_fn) {
  using A = acc_t<T>;
  for_each_position(w, b, t, c, k, parallel, "conv rows",
                    [&](int64_t bi, int64_t s, const A* wt, A* acc) GDN_ROW_INLINE {
                      forward_row(x, wt, t, c, k, bi, s, first_tap(seq_start, s), acc);
                      row_fn(bi, s, acc);
                    });
}

// dx of the conv from dy (rows split over threads).
template <typename T>
GDN_CPU_CLONES void backward_dx(const T* w, const T* dy, int64_t b, int64_t t, int64_t c, int64_t k,
                                T* dx, const int64_t* seq_start, bool parallel) {
  using A = acc_t<T>;
  for_each_position(w, b, t, c, k, parallel, "conv dx",
                    [&](int64_t bi, int64_t s, const A* wt, A* acc) GDN_ROW_INLINE {
                      for (int64_t ch = 0; ch < c; ++ch) acc[ch] = A(0);
                      for (int64_t j = 0; j < k; ++j) {
                        const int64_t dst = s + k - 1 - j;
                        if (dst >= t || first_tap(seq_start, dst) > s) continue;
                        const T* gr = dy + (bi * t + dst) * c;
                        const A* wr = wt + j * c;
                        for (int64_t ch = 0; ch < c; ++ch) acc[ch] += wr[ch] * to_acc(gr[ch]);
                      }
                      T* out = dx + (bi * t + s) * c;
                      for (int64_t ch = 0; ch < c; ++ch) out[ch] = from_acc<T>(acc[ch]);
                    });
}

// dw of the conv: threads own blocks of 16 channels (a cache line of fp32), and each sums over
// (batch, time) in order, a tap at a time, over the block's contiguous channels.
template <typename T>
GDN_CPU_CLONES void backward_dw(const T* x, const T* dy, int64_t b, int64_t t, int64_t c, int64_t k,
                                T* dw, const int64_t* seq_start, bool parallel) {
  using A = acc_t<T>;
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (c + kBlock - 1) / kBlock;
  parallel_rows(
      blocks, parallel, "conv dw", [k] { return std::vector<A>(size_t(k * kBlock)); },
      [&](int64_t cb, std::vector<A>& acc) GDN_ROW_INLINE {
        const int64_t c0 = cb * kBlock, n = std::min(kBlock, c - c0);
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t bi = 0; bi < b; ++bi)
          for (int64_t s = 0; s < t; ++s) {
            const T* gr = dy + (bi * t + s) * c + c0;
            const int64_t lo = first_tap(seq_start, s);
            for (int64_t j = 0; j < k; ++j) {
              const int64_t src = s - k + 1 + j;
              if (src < 0 || src < lo) continue;
              const T* xr = x + (bi * t + src) * c + c0;
              A* a = acc.data() + j * kBlock;
              for (int64_t i = 0; i < n; ++i) a[i] += to_acc(gr[i]) * to_acc(xr[i]);
            }
          }
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < k; ++j)
            dw[(c0 + i) * k + j] = from_acc<T>(acc[size_t(j * kBlock + i)]);
      });
}

// dx and dw of the conv from a gradient at its output that is computed row by row:
// grad_row(bi, s, wt, scratch, g) writes g[0, c) for output s of batch row bi (wt: the transposed
// taps; scratch: c accumulators of its own). The positions are cut into tiles of kTileRows of one
// batch row. A tile computes g over its rows and the k - 1 after them (the outputs its rows fed)
// into a buffer that stays in cache, then its rows of dx, then its share of dw into a buffer of
// its own; the shares are summed in tile order. One pass over x and the upstream gradient where
// g, dx and dw apart took three; the tiles depend on the shape alone, so the bits do not depend
// on the thread count.
template <typename T, typename GradRow>
GDN_CPU_CLONES void backward_tiled(const T* x, const T* w, int64_t b, int64_t t, int64_t c,
                                   int64_t k, T* dx, T* dw, const int64_t* seq_start, bool parallel,
                                   const GradRow& grad_row) {
  using A = acc_t<T>;
  constexpr int64_t kTileRows = 64;
  const int64_t tiles_per_row = (t + kTileRows - 1) / kTileRows, tiles = b * tiles_per_row;
  const std::vector<A> wt_buf = transposed_taps(w, c, k);
  const A* wt = wt_buf.data();
  std::vector<A> dw_shares(dw ? size_t(tiles * k * c) : 0);
  struct Scratch {
    std::vector<A> g, acc;
  };
  parallel_rows(
      tiles, parallel, "conv backward tiles",
      [&] {
        return Scratch{std::vector<A>(size_t((kTileRows + k - 1) * c)), std::vector<A>(size_t(c))};
      },
      [&](int64_t tile, Scratch& sc) GDN_ROW_INLINE {
        const int64_t bi = tile / tiles_per_row, s0 = (tile % tiles_per_row) * kTileRows;
        const int64_t s1 = std::min(s0 + kTileRows, t), s_end = std::min(s1 + k - 1, t);
        A* g = sc.g.data();  // g of position s at row s - s0
        for (int64_t s = s0; s < s_end; ++s) grad_row(bi, s, wt, sc.acc.data(), g + (s - s0) * c);
        if (dx)
          for (int64_t s = s0; s < s1; ++s) {
            A* acc = sc.acc.data();
            for (int64_t ch = 0; ch < c; ++ch) acc[ch] = A(0);
            for (int64_t j = 0; j < k; ++j) {
              const int64_t dst = s + k - 1 - j;
              if (dst >= t || first_tap(seq_start, dst) > s) continue;
              const A* gr = g + (dst - s0) * c;
              const A* wr = wt + j * c;
              for (int64_t ch = 0; ch < c; ++ch) acc[ch] += wr[ch] * gr[ch];
            }
            T* out = dx + (bi * t + s) * c;
            for (int64_t ch = 0; ch < c; ++ch) out[ch] = from_acc<T>(acc[ch]);
          }
        if (dw) {
          A* share = dw_shares.data() + tile * k * c;  // [k, c]
          std::fill(share, share + k * c, A(0));
          for (int64_t s = s0; s < s1; ++s) {
            const A* gr = g + (s - s0) * c;
            const int64_t lo = first_tap(seq_start, s);
            for (int64_t j = 0; j < k; ++j) {
              const int64_t src = s - k + 1 + j;
              if (src < 0 || src < lo) continue;
              const T* xr = x + (bi * t + src) * c;
              A* sh = share + j * c;
              for (int64_t ch = 0; ch < c; ++ch) sh[ch] += gr[ch] * to_acc(xr[ch]);
            }
          }
        }
      });
  if (!dw) return;
  // dw[ch, j] = the tiles' shares summed in tile order, 16 channels (a cache line) at a time.
  constexpr int64_t kBlock = 16;
  parallel_rows((c + kBlock - 1) / kBlock, parallel, "conv dw shares",
                [k] { return std::vector<A>(size_t(k * kBlock)); },
                [&](int64_t cb, std::vector<A>& acc) GDN_ROW_INLINE {
                  const int64_t c0 = cb * kBlock, n = std::min(kBlock, c - c0);
                  std::fill(acc.begin(), acc.end(), A(0));
                  for (int64_t tile = 0; tile < tiles; ++tile)
                    for (int64_t j = 0; j < k; ++j) {
                      const A* sh = dw_shares.data() + (tile * k + j) * c + c0;
                      for (int64_t i = 0; i < n; ++i) acc[size_t(j * kBlock + i)] += sh[i];
                    }
                  for (int64_t i = 0; i < n; ++i)
                    for (int64_t j = 0; j < k; ++j)
                      dw[(c0 + i) * k + j] = from_acc<T>(acc[size_t(j * kBlock + i)]);
                });
}

}  // namespace gdn::cpu::conv
