// The CUDA attention kernels' plan and index math (kernels/cuda/attention_plan.h), on the CPU:
// a tile fits 48 KB of shared memory and the register budget for every D <= 256 (fp32, fp64);
// the tile table covers every token of every sequence once, in tiles that never cross a
// sequence start (packed and unpacked); the key tiles a query tile visits and the query tiles a
// key tile visits are exactly the tiles holding a visible (query, key) pair, for windows
// {0, 1, 2, 3, 5, 16, 17, 33, 64, 65, >= len}; lse's index matches the CPU kernel's [B, H, T]
// layout; the CUDA workspace holds the table and Delta; the kernels' algorithm, transcribed block
// by block in plain C++, matches the CPU kernel at every tile size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention_plan.h"

namespace gdn::attn::cuda_plan {
namespace {

TEST(AttentionCudaPlan, FitsSharedMemoryAndRegistersForEveryHeadDim) {
  for (int64_t acc : {4, 8})
    for (int64_t D = 1; D <= kMaxHeadDim; ++D) {
      const Plan plan = plan_for(D, acc);
      ASSERT_GT(plan.bt, 0) << "D " << D << " acc " << acc;
      const Layout l = layout_of(plan.bt, D);
      EXPECT_EQ(plan.smem_bytes, l.elems * acc);
      EXPECT_LE(plan.smem_bytes, 48 * 1024) << "D " << D;
      const int per_thread = acc == 8 ? kMaxPerThread<double> : kMaxPerThread<float>;
      EXPECT_LE(plan.bt * D, int64_t(kThreads) * per_thread) << "D " << D;
      // Regions in order, without overlap: four row tiles, two score tiles, two statistics.
      EXPECT_EQ(l.b - l.a, plan.bt * (D + 1));
      EXPECT_EQ(l.d - l.c, plan.bt * (D + 1));
      EXPECT_EQ(l.t - l.s, plan.bt * (plan.bt + 1));
      EXPECT_EQ(l.r0 - l.t, plan.bt * (plan.bt + 1));
      EXPECT_EQ(l.elems - l.r1, plan.bt);
      // A row of the score tile holds a key tile; the forward's per-row factors fit tile t.
      EXPECT_GE(l.lds, plan.bt);
    }
  // The tiles the plan picks (documented in attention_plan.h).
  EXPECT_EQ(plan_for(32, 4).bt, 32);
  EXPECT_EQ(plan_for(64, 4).bt, 32);
  EXPECT_EQ(plan_for(128, 4).bt, 16);
  EXPECT_EQ(plan_for(256, 4).bt, 8);
  EXPECT_EQ(plan_for(256, 8).bt, 4);
}

Problem packed(std::vector<int64_t> cu) {
  Problem p;
  p.B = 1;
  p.T = cu.back();
  p.H = 4;
  p.HKV = 2;
  p.D = 64;
  p.scale = 0.125;
  p.cu_seqlens = std::move(cu);
  return p;
}

Problem unpacked(int64_t B, int64_t T) {
  Problem p;
  p.B = B;
  p.T = T;
  p.H = 4;
  p.HKV = 2;
  p.D = 64;
  p.scale = 0.125;
  return p;
}

// The table a kernel reads: from the spans (packed) or computed (unpacked).
TileTable table_of(const Problem& p, int64_t bt, const std::vector<TileSpan>& spans) {
  return TileTable{p.packed() ? spans.data() : nullptr, tile_count(p, bt), p.T, tiles_in(p.T, bt),
                   bt};
}

TEST(AttentionCudaPlan, TileTableCoversEveryTokenOnceWithinItsSequence) {
  const std::vector<Problem> problems = {
      packed({0, 5, 70, 100}), packed({0, 1}), packed({0, 64, 65, 129, 1129}),
      unpacked(3, 130),        unpacked(1, 1), unpacked(2, 64)};
  for (const Problem& p : problems)
    for (int64_t bt : {4, 8, 16, 32, 64}) {
      const std::vector<TileSpan> spans = tile_spans(p, bt);
      const TileTable table = table_of(p, bt, spans);
      if (p.packed()) {
        EXPECT_EQ(int64_t(spans.size()), table.count);
      }
      std::vector<int> covered(size_t(p.B * p.T), 0);
      for (int64_t i = 0; i < table.count; ++i) {
        const TileSpan s = table.at(i);
        ASSERT_GE(s.start, 0);
        ASSERT_LT(s.start, s.len);
        EXPECT_EQ(s.start % bt, 0);  // tiles aligned to the sequence start
        const int64_t rows = std::min(bt, s.len - s.start);
        for (int64_t r = 0; r < rows; ++r) ++covered[size_t(s.tok0 + s.start + r)];
        if (p.packed()) {  // tok0 and len are those of a sequence of cu_seqlens
          bool found = false;
          for (size_t n = 0; n + 1 < p.cu_seqlens.size(); ++n)
            found |= p.cu_seqlens[n] == s.tok0 && p.cu_seqlens[n + 1] - s.tok0 == s.len;
          EXPECT_TRUE(found);
        } else {
          EXPECT_EQ(s.len, p.T);
          EXPECT_EQ(s.tok0 % p.T, 0);
        }
      }
      for (int c : covered) EXPECT_EQ(c, 1) << "bt " << bt;
    }
}

TEST(AttentionCudaPlan, TileRangesAreExactlyTheTilesWithVisiblePairs) {
  for (int64_t len : {1, 5, 64, 65, 100, 130, 300})
    for (int64_t window : {int64_t(0), int64_t(1), int64_t(2), int64_t(3), int64_t(5), int64_t(16),
                           int64_t(17), int64_t(33), int64_t(64), int64_t(65), len, len + 5})
      for (int64_t bt : {4, 8, 16, 32, 64}) {
        const int64_t tiles = tiles_in(len, bt);
        auto rows = [&](int64_t tile) { return std::min(bt, len - tile * bt); };
        // seen[r][c]: some query of query tile r sees some key of key tile c.
        std::vector<std::vector<bool>> seen(static_cast<size_t>(tiles));
        for (auto& row : seen) row.assign(size_t(tiles), false);
        for (int64_t t = 0; t < len; ++t)
          for (int64_t s = 0; s < len; ++s) {
            const bool cpu_visible = s <= t && (window == 0 || s >= t - window + 1);
            ASSERT_EQ(visible(window, t, s), cpu_visible) << t << " " << s << " w " << window;
            if (cpu_visible) seen[size_t(t / bt)][size_t(s / bt)] = true;
          }
        for (int64_t r = 0; r < tiles; ++r) {
          const TileRange keys = key_tiles_seen(window, bt, r * bt, rows(r));
          for (int64_t c = 0; c < tiles; ++c)
            EXPECT_EQ(c >= keys.first && c <= keys.last, bool(seen[size_t(r)][size_t(c)]))
                << "query tile " << r << " key tile " << c << " len " << len << " w " << window;
        }
        for (int64_t c = 0; c < tiles; ++c) {
          const TileRange queries = query_tiles_seeing(window, bt, c * bt, rows(c), len);
          for (int64_t r = 0; r < tiles; ++r)
            EXPECT_EQ(r >= queries.first && r <= queries.last, bool(seen[size_t(r)][size_t(c)]))
                << "key tile " << c << " query tile " << r << " len " << len << " w " << window;
        }
      }
}

// ---- the kernels' algorithm, block by block in plain C++ ----------------------------------------
// A transcription of attention.cu's loops (tiles from the table, the tile ranges, the masks, the
// online softmax per row, Delta, dK/dV over the group's heads and query tiles, dQ over key tiles)
// in double, against the CPU kernel in double: it checks the algorithm and the plan's index math
// together at every tile size, not the CUDA code itself.

using Vec = std::vector<double>;

struct Emulated {
  Vec o, lse, dq, dk, dv;
};

Emulated emulate(const Problem& p, int64_t bt, const Vec& q, const Vec& k, const Vec& v,
                 const Vec& d_o) {
  const int64_t D = p.D, H = p.H, HKV = p.HKV, T = p.T, group = p.group();
  const std::vector<TileSpan> spans = tile_spans(p, bt);
  const TileTable table = table_of(p, bt, spans);
  Emulated e{Vec(q.size()), Vec(size_t(p.B * H * T)), Vec(q.size()), Vec(k.size()), Vec(v.size())};
  auto qi = [&](int64_t tok, int64_t h) { return size_t((tok * H + h) * D); };
  auto ki = [&](int64_t tok, int64_t h) { return size_t((tok * HKV + h) * D); };
  auto dot = [&](const Vec& a, size_t ia, const Vec& b, size_t ib) {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += a[ia + size_t(d)] * b[ib + size_t(d)];
    return s;
  };
  // Forward: a block per (query tile, head).
  for (int64_t tile = 0; tile < table.count; ++tile)
    for (int64_t h = 0; h < H; ++h) {
      const TileSpan ts = table.at(tile);
      const int64_t r0 = ts.start, br = std::min(bt, ts.len - r0), kv = h / group;
      Vec m(size_t(br), -std::numeric_limits<double>::infinity()), l(size_t(br), 0);
      Vec acc(size_t(br * D), 0);
      const TileRange keys = key_tiles_seen(p.window, bt, r0, br);
      for (int64_t c = keys.first; c <= keys.last; ++c) {
        const int64_t c0 = c * bt, bc = std::min(bt, ts.len - c0);
        for (int64_t i = 0; i < br; ++i) {
          Vec s(size_t(bc), 0);
          double mx = m[size_t(i)];
          for (int64_t j = 0; j < bc; ++j)
            if (visible(p.window, r0 + i, c0 + j)) {
              s[size_t(j)] = p.scale * dot(q, qi(ts.tok0 + r0 + i, h), k, ki(ts.tok0 + c0 + j, kv));
              mx = std::max(mx, s[size_t(j)]);
            }
          double sum = 0;
          for (int64_t j = 0; j < bc; ++j) {
            s[size_t(j)] = visible(p.window, r0 + i, c0 + j) ? std::exp(s[size_t(j)] - mx) : 0;
            sum += s[size_t(j)];
          }
          const double f = mx == m[size_t(i)] ? 1 : std::exp(m[size_t(i)] - mx);
          l[size_t(i)] = l[size_t(i)] * f + sum;
          m[size_t(i)] = mx;
          for (int64_t d = 0; d < D; ++d) {
            double o = acc[size_t(i * D + d)] * f;
            for (int64_t j = 0; j < bc; ++j)
              o += s[size_t(j)] * v[ki(ts.tok0 + c0 + j, kv) + size_t(d)];
            acc[size_t(i * D + d)] = o;
          }
        }
      }
      for (int64_t i = 0; i < br; ++i) {
        for (int64_t d = 0; d < D; ++d)
          e.o[qi(ts.tok0 + r0 + i, h) + size_t(d)] = acc[size_t(i * D + d)] / l[size_t(i)];
        e.lse[size_t(stat_index(T, H, ts.tok0 + r0 + i, h))] =
            m[size_t(i)] + std::log(l[size_t(i)]);
      }
    }
  // Delta per (token, head).
  Vec delta(e.lse.size());
  for (int64_t tok = 0; tok < p.B * T; ++tok)
    for (int64_t h = 0; h < H; ++h)
      delta[size_t(stat_index(T, H, tok, h))] = dot(e.o, qi(tok, h), d_o, qi(tok, h));
  // f(query token, key token, P, dS) for each visible pair of a query block (r0, br rows) and a
  // key block (c0, bc columns) of tile ts, head h on kv head kv; queries outside, keys inside
  // (each accumulator of dK, dV or dQ takes its terms in the same order either way).
  auto each_visible = [&](const TileSpan& ts, int64_t h, int64_t kv, int64_t r0, int64_t br,
                          int64_t c0, int64_t bc, auto&& f) {
    for (int64_t i = 0; i < br; ++i)
      for (int64_t j = 0; j < bc; ++j) {
        if (!visible(p.window, r0 + i, c0 + j)) continue;
        const int64_t tok_q = ts.tok0 + r0 + i, tok_k = ts.tok0 + c0 + j;
        const size_t st = size_t(stat_index(T, H, tok_q, h));
        const double pr = std::exp(p.scale * dot(q, qi(tok_q, h), k, ki(tok_k, kv)) - e.lse[st]);
        const double ds = pr * (dot(d_o, qi(tok_q, h), v, ki(tok_k, kv)) - delta[st]);
        f(tok_q, tok_k, pr, ds);
      }
  };
  // dK, dV: a block per (key tile, kv head).
  for (int64_t tile = 0; tile < table.count; ++tile)
    for (int64_t kv = 0; kv < HKV; ++kv) {
      const TileSpan ts = table.at(tile);
      const int64_t c0 = ts.start, bc = std::min(bt, ts.len - c0);
      const TileRange queries = query_tiles_seeing(p.window, bt, c0, bc, ts.len);
      for (int64_t h = kv * group; h < (kv + 1) * group; ++h)
        for (int64_t r = queries.first; r <= queries.last; ++r) {
          const int64_t r0 = r * bt, br = std::min(bt, ts.len - r0);
          each_visible(
              ts, h, kv, r0, br, c0, bc, [&](int64_t tok_q, int64_t tok_k, double pr, double ds) {
                for (int64_t d = 0; d < D; ++d) {
                  e.dv[ki(tok_k, kv) + size_t(d)] += pr * d_o[qi(tok_q, h) + size_t(d)];
                  e.dk[ki(tok_k, kv) + size_t(d)] += p.scale * ds * q[qi(tok_q, h) + size_t(d)];
                }
              });
        }
    }
  // dQ: a block per (query tile, head).
  for (int64_t tile = 0; tile < table.count; ++tile)
    for (int64_t h = 0; h < H; ++h) {
      const TileSpan ts = table.at(tile);
      const int64_t r0 = ts.start, br = std::min(bt, ts.len - r0), kv = h / group;
      const TileRange keys = key_tiles_seen(p.window, bt, r0, br);
      for (int64_t c = keys.first; c <= keys.last; ++c) {
        const int64_t c0 = c * bt, bc = std::min(bt, ts.len - c0);
        each_visible(
            ts, h, kv, r0, br, c0, bc, [&](int64_t tok_q, int64_t tok_k, double, double ds) {
              for (int64_t d = 0; d < D; ++d)
                e.dq[qi(tok_q, h) + size_t(d)] += p.scale * ds * k[ki(tok_k, kv) + size_t(d)];
            });
      }
    }
  return e;
}

// max |a - b| / max(max |b|, 1): with a window of 1 each query sees only itself, so o = v and dS
// is 0 up to rounding (dq, dk of order 1e-16 on both sides).
double max_rel(const Vec& a, const Vec& b) {
  double num = 0, den = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}

TEST(AttentionCudaPlan, KernelAlgorithmMatchesTheCpuKernelAtEveryTileSize) {
  std::mt19937 gen(7);
  std::normal_distribution<double> normal;
  auto randn = [&](int64_t n) {
    Vec x(static_cast<size_t>(n));
    for (double& y : x) y = normal(gen);
    return x;
  };
  std::vector<Problem> problems;
  for (int64_t window : {0, 1, 2, 5, 17, 33, 200}) {
    Problem a = unpacked(2, 70);
    a.H = 4;
    a.HKV = 2;
    a.D = 8;
    a.window = window;
    problems.push_back(a);
    Problem b = packed({0, 5, 70, 100});
    b.H = 3;
    b.HKV = 1;
    b.D = 6;
    b.window = window;
    problems.push_back(b);
  }
  for (const Problem& p : problems) {
    const Vec q = randn(p.B * p.T * p.H * p.D), k = randn(p.B * p.T * p.HKV * p.D);
    const Vec v = randn(p.B * p.T * p.HKV * p.D), d_o = randn(p.B * p.T * p.H * p.D);
    Vec o(q.size()), lse(size_t(p.B * p.H * p.T)), dq(q.size()), dk(k.size()), dv(v.size());
    Vec fws(size_t(forward_workspace_elems(p))), bws(size_t(backward_workspace_elems(p)));
    forward_cpu<double>(p, q.data(), k.data(), v.data(), o.data(), lse.data(), fws.data());
    backward_cpu<double>(p, q.data(), k.data(), v.data(), o.data(), lse.data(), d_o.data(),
                         dq.data(), dk.data(), dv.data(), bws.data());
    for (int64_t bt : {4, 8, 16, 32, 64}) {
      const Emulated e = emulate(p, bt, q, k, v, d_o);
      const std::string what = "bt " + std::to_string(bt) + " window " + std::to_string(p.window) +
                               (p.packed() ? " packed" : "");
      EXPECT_LT(max_rel(e.o, o), 1e-12) << what;
      EXPECT_LT(max_rel(e.lse, lse), 1e-12) << what;
      EXPECT_LT(max_rel(e.dq, dq), 1e-12) << what;
      EXPECT_LT(max_rel(e.dk, dk), 1e-12) << what;
      EXPECT_LT(max_rel(e.dv, dv), 1e-12) << what;
    }
  }
}

TEST(AttentionCudaPlan, StatIndexIsTheLseLayout) {
  const int64_t B = 3, T = 7, H = 5;
  std::set<int64_t> seen;
  for (int64_t tok = 0; tok < B * T; ++tok)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t b = tok / T, t = tok % T;
      EXPECT_EQ(stat_index(T, H, tok, h), (b * H + h) * T + t);
      seen.insert(stat_index(T, H, tok, h));
    }
  EXPECT_EQ(int64_t(seen.size()), B * T * H);
  EXPECT_EQ(div32(1000003, 7), 1000003 / 7);
  EXPECT_EQ(mod32(1000003, 7), 1000003 % 7);
}

TEST(AttentionCudaPlan, TableRoomCoversEitherPlan) {
  for (const Problem& p : {packed({0, 5, 70, 100}), packed({0, 3, 4, 1000}), unpacked(2, 100)})
    for (int64_t D : {8, 32, 64, 128, 256}) {
      Problem q = p;
      q.D = D;
      for (int64_t acc : {4, 8}) {
        const int64_t bt = plan_for(D, acc).bt;
        // Packed: the table's bytes fit the room reserved in units of 4 bytes (acc elements are
        // >= 4 bytes); unpacked: no table.
        if (q.packed()) {
          EXPECT_GE(table_elems(q, bt) * 4, tile_count(q, bt) * int64_t(sizeof(TileSpan)));
        } else {
          EXPECT_EQ(table_elems(q, bt), 0);
        }
      }
    }
}

TEST(AttentionCudaPlan, IndexMathFitsInt32) {
  Problem p = unpacked(1, 1000);
  EXPECT_TRUE(fits_int32(p));
  p.B = 1 << 20;
  p.T = 1 << 10;
  EXPECT_FALSE(fits_int32(p));
}

}  // namespace
}  // namespace gdn::attn::cuda_plan
