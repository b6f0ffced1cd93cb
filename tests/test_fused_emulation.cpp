// The fused CUDA gated delta rule's logic on the CPU: the GPU's own block code
// (kernels/cuda/gdr_fused_block.h) run by the emulator (gdr_fused_emulate.h) against the fp64
// recurrent reference, fp64 and fp32 (CUDA-core path) and bf16 (tensor-core fragments through an
// exact model of mma.sync), forward o, ht and every gradient, on odd shapes (T not a multiple of
// C, GVA, several V tiles, K != V, h0/dht or not, strong decay); thread order reversed gives the
// same bits (no races inside a phase); the backward's blocks hand their running sums on in
// ticket order (a wait no earlier block releases throws); the mma.sync fragment maps; the plan.
// What this cannot check (the real mma.sync, barriers, shared-memory limits at launch) is checked
// by test_cuda_gdr on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "kernels/cuda/gdr_fused_emulate.h"
#include "kernels/gated_delta_rule.h"
#include "tests/fused_test_util.h"
#include "tests/gdr_test_data.h"
#include "tests/packed_case.h"
#include "tests/packed_test_util.h"

namespace gdn::gdr {
namespace {

using namespace test_data;

// ---- mma.sync m16n8k16 fragments --------------------------------------------------------------

TEST(MmaFragments, LoadEmulateStoreIsTheProductOfRoundedOperands) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n01(0, 1);
  float a[16][16], b[16][8];
  for (auto& r : a)
    for (auto& x : r) x = n01(rng);
  for (auto& r : b)
    for (auto& x : r) x = n01(rng);
  auto aop = [&](int i, int l) { return a[i][l]; };
  auto bop = [&](int l, int j) { return b[l][j]; };
  uint32_t wa[32][4], wb[32][2];
  float d[32][4] = {};
  for (int lane = 0; lane < 32; ++lane) {
    cuda::load_a_fragment(lane, aop, 0, 0, wa[lane]);
    cuda::load_b_fragment(lane, bop, 0, 0, wb[lane]);
  }
  cuda::emulate_mma_m16n8k16(wa, wb, d);
  std::set<std::pair<int, int>> seen;
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 4; ++e) {
      const int i = cuda::acc_row(lane, e), j = cuda::acc_col(lane, e);
      EXPECT_TRUE(seen.insert({i, j}).second) << "element " << i << "," << j << " owned twice";
      double want = 0;
      for (int l = 0; l < 16; ++l)
        want += double(float(bf16(a[i][l]))) * double(float(bf16(b[l][j])));
      EXPECT_NEAR(d[lane][e], want, 1e-5 * (1 + std::abs(want))) << i << "," << j;
    }
  EXPECT_EQ(seen.size(), 128u);
}

TEST(MmaFragments, Bf16PairsLoadTheWordsTheGenericPathPacks) {
  // A 16 x 32 bf16 matrix (ld 32) read as rows (A operand) and as a transposed B operand: the
  // one-word pair loads equal the words packed element by element.
  std::mt19937 rng(5);
  std::normal_distribution<float> n01(0, 1);
  std::vector<bf16> m(16 * 32);
  for (auto& x : m) x = bf16(n01(rng));
  const cuda::RowsOf<float, bf16> rows{m.data(), 32};
  const cuda::ColsOf<float, bf16> cols{m.data(), 32};
  auto rows_generic = [&](int i, int l) { return float(m[i * 32 + l]); };
  auto cols_generic = [&](int l, int j) { return float(m[j * 32 + l]); };
  static_assert(cuda::HasKPair<cuda::RowsOf<float, bf16>>::value &&
                cuda::HasKPair<cuda::ColsOf<float, bf16>>::value &&
                !cuda::HasKPair<cuda::RowsOf<float, float>>::value);
  for (int lane = 0; lane < 32; ++lane)
    for (int k0 : {0, 16}) {
      uint32_t wa[4], ga[4], wb[2], gb[2];
      cuda::load_a_fragment(lane, rows, 0, k0, wa);
      cuda::load_a_fragment(lane, rows_generic, 0, k0, ga);
      cuda::load_b_fragment(lane, cols, k0, 8, wb);
      cuda::load_b_fragment(lane, cols_generic, k0, 8, gb);
      for (int w = 0; w < 4; ++w) EXPECT_EQ(wa[w], ga[w]) << "lane " << lane << " word " << w;
      for (int w = 0; w < 2; ++w) EXPECT_EQ(wb[w], gb[w]) << "lane " << lane << " word " << w;
    }
}

TEST(MmaFragments, BlockGemmCoversEveryOutputOnce) {
  // Through the warp strips of an 8-warp block (1, 2 and 4 tiles wide), forward and reversed
  // warp order, with and without a contraction span.
  struct Dims3 {
    int M, N, K;
  };
  for (const Dims3 s : {Dims3{48, 24, 32}, Dims3{32, 64, 32}, Dims3{64, 64, 16}}) {
    const int M = s.M, N = s.N, K = s.K;
    std::vector<float> a(M * K), b(K * N);
    std::mt19937 rng(4);
    std::normal_distribution<float> n01(0, 1);
    for (auto& x : a) x = n01(rng);
    for (auto& x : b) x = n01(rng);
    for (bool reversed : {false, true})
      for (bool half : {false, true}) {
        // half: a zero from K/2 on, and a span that says so (computed up to whole k-steps)
        const int kend = half ? K / 2 : K;
        std::vector<int> hits(M * N, 0);
        std::vector<float> c(M * N, 0);
        cuda::block_gemm<float>(
            cuda::Mma{}, cuda::BlockExec::host(256, reversed), M, N, K,
            [&](int i, int l) { return l < kend ? a[i * K + l] : 0.f; },
            [&](int l, int j) { return b[l * N + j]; },
            [&](int i, int j, float acc) {
              hits[i * N + j]++;
              c[i * N + j] = acc;
            },
            [&](int, int, int, int) {
              return cuda::KSpan{0, kend};
            });
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < N; ++j) {
            ASSERT_EQ(hits[i * N + j], 1) << M << "x" << N << " at " << i << "," << j;
            double want = 0;
            for (int l = 0; l < kend; ++l)
              want += double(float(bf16(a[i * K + l]))) * double(float(bf16(b[l * N + j])));
            EXPECT_NEAR(c[i * N + j], want, 1e-5 * (1 + std::abs(want)));
          }
      }
  }
  EXPECT_EQ(cuda::strip_tiles(48, 24, 8), 1);
  EXPECT_EQ(cuda::strip_tiles(32, 64, 8), 2);
  EXPECT_EQ(cuda::strip_tiles(64, 64, 8), 4);
}

// ---- the plan ---------------------------------------------------------------------------------

Problem shape(int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V, int chunk) {
  return problem_of(B, T, H, HV, K, V, chunk, Impl::fused);
}

constexpr int64_t kH200Smem = 232448, kH200Sms = 132;  // opt-in bytes per block, SMs

TEST(FusedPlan, SeedShapesFitAnH200) {
  for (int64_t T : {512, 2048, 8192})
    for (int64_t D : {64, 128})
      for (bool backward : {false, true}) {
        const Problem p = shape(4, T, 8, 8, D, D, 64);
        const fused::Plan pl = fused::plan(p, backward, 4, kH200Smem, kH200Sms);
        ASSERT_TRUE(pl.ok) << pl.why;
        EXPECT_EQ(pl.sub, 64);  // the Problem's chunk: no sub-chunks
        EXPECT_LE(pl.smem_bytes, kH200Smem);
        EXPECT_EQ(pl.tiles * pl.vt, D);
        EXPECT_EQ(pl.blocks, 4 * 8 * pl.tiles);
      }
}

TEST(FusedPlan, ChoosesTheTileByPredictedTime) {
  // B=4, H=8, K=V=128, C=64 forward: vt 64 gives 64 blocks (half the SMs idle), vt 16 gives 256
  // blocks (two waves, 4x the key products); vt 32 (128 blocks, one wave) wins.
  const Problem p = shape(4, 2048, 8, 8, 128, 128, 64);
  EXPECT_EQ(fused::plan(p, false, 4, kH200Smem, kH200Sms).vt, 32);
  // Many slices fill the device at any width: the widest tile does the least work.
  const Problem wide = shape(64, 2048, 8, 8, 128, 128, 64);
  EXPECT_EQ(fused::plan(wide, false, 4, kH200Smem, kH200Sms).vt, 64);
  // An override wins when it fits.
  EXPECT_EQ(fused::plan(p, false, 4, kH200Smem, kH200Sms, 16).vt, 16);
  // Registers bound the resident blocks too: with C = 16 a multiprocessor's shared memory holds 5
  // blocks of vt = 32 or 3 of vt = 64, and the narrower tile is predicted faster; at 200
  // registers a thread one block is resident, and the wider tile (repeating less of the key
  // products) wins.
  const Problem small_chunks = shape(16, 2048, 16, 16, 128, 128, 16);
  EXPECT_EQ(fused::plan(small_chunks, false, 4, kH200Smem, kH200Sms).vt, 32);
  EXPECT_EQ(fused::plan(small_chunks, false, 4, kH200Smem, kH200Sms, 0, 200).vt, 64);
}

TEST(FusedPlan, Bf16KeysInSharedMemoryWidenTheTile) {
  // [k; scale q] kept in bf16 halves its bytes: the K = 128, C = 64 backward fits vt = 32 (one
  // wave of 128 blocks) where fp32 inputs fit only vt = 16, and K = 256 fits without sub-chunks.
  const Problem p = shape(4, 8192, 8, 8, 128, 128, 64);
  EXPECT_EQ(fused::plan(p, true, 4, kH200Smem, kH200Sms).vt, 16);
  EXPECT_EQ(fused::plan(p, true, 2, kH200Smem, kH200Sms).vt, 32);
  EXPECT_EQ(fused::smem_bytes(p, 16, true, 4) - fused::smem_bytes(p, 16, true, 2),
            2 * 64 * 128 * 2);
  EXPECT_EQ(fused::plan(shape(1, 256, 1, 1, 256, 256, 64), true, 4, kH200Smem, 132).sub, 32);
  EXPECT_EQ(fused::plan(shape(1, 256, 1, 1, 256, 256, 64), true, 2, kH200Smem, 132).sub, 64);
  // fp64 inputs take twice the fp32 bytes.
  EXPECT_EQ(fused::smem_bytes(p, 16, false, 8), 2 * fused::smem_bytes(p, 16, false, 4));
}

TEST(FusedPlan, SaysWhyWhenNothingFits) {
  // K = 256 fp32 in the 48 KiB a block gets without opting in: not even 16-row sub-chunks fit.
  const fused::Plan big = fused::plan(shape(1, 256, 1, 1, 256, 256, 64), true, 4, 49152, 132);
  EXPECT_FALSE(big.ok);
  EXPECT_NE(big.why.find("shared memory"), std::string::npos) << big.why;
  EXPECT_NE(big.why.find("sub-chunks of it down to 16"), std::string::npos) << big.why;
  // Head dims must be multiples of 16.
  const fused::Plan odd = fused::plan(shape(1, 64, 1, 1, 24, 40, 16), false, 4, kH200Smem, 132);
  EXPECT_FALSE(odd.ok);
  EXPECT_NE(odd.why.find("multiples of 16"), std::string::npos) << odd.why;
}

constexpr int64_t kRtx3090Smem = 101376, kRtx3090Sms = 82;  // 99 KiB opt-in, sm_86

TEST(FusedPlan, SplitsTheChunkWhereItDoesNotFit) {
  // On a 99 KiB part no C = 64 backward fits at any head dim; the kernels step through each chunk
  // in two sub-chunks of 32 (the largest that fits), and the residual keeps C = 64.
  for (int64_t D : {64, 128})
    for (int64_t in_bytes : {2, 4}) {
      SCOPED_TRACE("D " + std::to_string(D) + ", input bytes " + std::to_string(in_bytes));
      const Problem p = shape(4, 8192, 8, 8, D, D, 64);
      EXPECT_GT(fused::smem_bytes(p, 16, true, in_bytes), kRtx3090Smem);
      const fused::Plan pl = fused::plan(p, true, in_bytes, kRtx3090Smem, kRtx3090Sms);
      ASSERT_TRUE(pl.ok) << pl.why;
      EXPECT_EQ(pl.sub, 32);
      EXPECT_LE(pl.smem_bytes, kRtx3090Smem);
      EXPECT_EQ(pl.smem_bytes, fused::smem_bytes(p, pl.vt, true, in_bytes, 32));
      EXPECT_EQ(pl.smem_bytes,
                fused::smem_bytes(shape(4, 8192, 8, 8, D, D, 32), pl.vt, true, in_bytes));
    }
  // An A100's 163 KiB holds the K = 64 bf16 backward whole, the K = 128 one in sub-chunks.
  EXPECT_EQ(fused::plan(shape(4, 8192, 8, 8, 64, 64, 64), true, 2, 166912, 108).sub, 64);
  EXPECT_EQ(fused::plan(shape(4, 8192, 8, 8, 128, 128, 64), true, 2, 166912, 108).sub, 32);
  // K = 256 steps in sub-chunks of 16 on the 99 KiB part; only fp64 at K = 256 fits nothing.
  const Problem k256 = shape(4, 8192, 8, 8, 256, 256, 64);
  EXPECT_EQ(fused::plan(k256, true, 2, kRtx3090Smem, kRtx3090Sms).sub, 16);
  EXPECT_EQ(fused::plan(k256, true, 4, kRtx3090Smem, kRtx3090Sms).sub, 16);
  EXPECT_FALSE(fused::plan(k256, true, 8, kRtx3090Smem, kRtx3090Sms).ok);
  // The forward at K = 128 too; at K = 64 bf16 fits C = 64.
  const Problem k128 = shape(4, 8192, 8, 8, 128, 128, 64);
  EXPECT_EQ(fused::plan(k128, false, 4, kRtx3090Smem, kRtx3090Sms).sub, 32);
  EXPECT_EQ(fused::plan(k128, false, 2, kRtx3090Smem, kRtx3090Sms).sub, 32);
  EXPECT_EQ(fused::plan(shape(4, 8192, 8, 8, 64, 64, 64), false, 2, kRtx3090Smem, kRtx3090Sms).sub,
            64);
  // The Problem's chunk is kept wherever it fits, although the multiply-add count alone would
  // prefer smaller steps; an override forces a sub-chunk, and one that does not divide the chunk
  // or does not fit says so.
  EXPECT_LT(fused::block_macs(k128, 32, true, 32) * 2, fused::block_macs(k128, 32, true));
  EXPECT_EQ(fused::plan(k128, true, 2, kH200Smem, kH200Sms, 0, 0, 16).sub, 16);
  EXPECT_FALSE(fused::plan(k128, true, 2, kH200Smem, kH200Sms, 0, 0, 48).ok);
  // The backward's recomputed states: (R - 1) / 2 forward state updates per step.
  EXPECT_GT(fused::block_macs(k128, 16, true, 16),
            fused::block_macs(shape(4, 8192, 8, 8, 128, 128, 16), 16, true));
  // The kernels' steps and the residual's chunks.
  const fused::Dims d = fused::dims_of(shape(2, 100, 1, 1, 32, 32, 64), 16, 16);
  EXPECT_EQ(d.C, 16);
  EXPECT_EQ(d.NT(), 7);
  EXPECT_EQ(d.R, 4);
  EXPECT_EQ(d.NR, 2);
  const fused::Dims whole = fused::dims_of(shape(2, 100, 1, 1, 32, 32, 64), 16);
  EXPECT_EQ(whole.C, 64);
  EXPECT_EQ(whole.NT(), 2);
  EXPECT_EQ(whole.R, 1);
  EXPECT_EQ(whole.NR, 2);
}

TEST(FusedPlan, LayoutsDoNotOverlapAndAreAligned) {
  for (int64_t in_bytes : {2, 4})
    for (int64_t C : {16, 32, 64})
      for (int64_t vt : {16, 32, 64}) {
        const int64_t kq = 2 * C * 128 * in_bytes / 4;  // [k; q] in the input type, fp32 words
        const fused::ForwardLayout f(C, 128, vt, in_bytes);
        const int64_t fo[] = {f.S,  f.kq, f.kkg, f.p,     f.a, f.tinv, f.y,    f.og,
                              f.vn, f.gl, f.G,   f.gamma, f.e, f.beta, f.total};
        const int64_t fs[] = {128 * vt, kq,     C * C, C * C, C * C, 16 * C, C * vt,
                              C * vt,   C * vt, C,     C,     C,     C,      C};
        for (int i = 0; i < 14; ++i) {
          EXPECT_EQ(fo[i] % 16, 0);
          EXPECT_GE(fo[i + 1], fo[i] + fs[i]) << "forward buffer " << i;
        }
        const fused::BackwardLayout b(C, 128, vt, 256, in_bytes);
        const int64_t bo[] = {b.S,    b.dS, b.kq, b.kkg,   b.p,      b.a,      b.dpg,
                              b.xg,   b.da, b.yr, b.ksg,   b.qd,     b.dO,     b.kd,
                              b.vn,   b.gl, b.G,  b.gamma, b.e,      b.beta,   b.avec,
                              b.svec, b.zy, b.zk, b.red,   b.consts, b.ticket, b.total};
        const int64_t bs[] = {128 * vt, 128 * vt, kq,     C * C,  C * C,  C * C,  C * C,
                              C * C,    C * C,    C * vt, C * vt, C * vt, C * vt, C * vt,
                              C * vt,   C,        C,      C,      C,      C,      C,
                              C,        C,        C,      256,    2,      1};
        for (int i = 0; i < 27; ++i) {
          EXPECT_EQ(bo[i] % 16, 0);
          EXPECT_GE(bo[i + 1], bo[i] + bs[i]) << "backward buffer " << i;
        }
      }
}

TEST(FusedPlan, BackwardWorkspaceIsOneSetOfSumsAndTheFlags) {
  // The seed's largest fp32 shape: dq, dk [B, T, H, K] and dg, dbeta [B, T, HV] once (270 MB,
  // where a partial per V tile took 8x that at vt = 16), then B * H * NT flags and the counter.
  const Problem p = shape(4, 8192, 8, 8, 128, 128, 64);
  const fused::BackwardWorkspace w(fused::dims_of(p, 16), 4);
  const int64_t keys = 4 * 8192 * 8 * 128, gates = 4 * 8192 * 8;
  EXPECT_EQ(w.dk - w.dq, keys);
  EXPECT_EQ(w.dg - w.dk, keys);
  EXPECT_EQ(w.dbeta - w.dg, gates);
  EXPECT_EQ(w.flags - w.dbeta, gates);
  EXPECT_EQ(w.counter, 4 * 8 * 128);
  EXPECT_EQ(w.elems - w.flags, w.flag_words);  // 4-byte ints in 4-byte elements
  EXPECT_EQ(fused::backward_workspace(p, 4), w.elems);
  EXPECT_LT(w.elems * 4, int64_t(280) << 20);
  // The same for every V tile; fp64 and GVA: flags per key head, sums of dg, dbeta per value head.
  EXPECT_EQ(fused::BackwardWorkspace(fused::dims_of(p, 64), 4).elems, w.elems);
  const Problem gva = shape(2, 100, 2, 6, 32, 16, 32);
  const fused::BackwardWorkspace g(fused::dims_of(gva, 16), 8);
  EXPECT_EQ(g.dg - g.dk, 2 * 100 * 2 * 32);
  EXPECT_EQ(g.flags - g.dbeta, 2 * 100 * 6);
  EXPECT_EQ(g.flag_words, 2 * 2 * 4 + 1);
  EXPECT_EQ(g.elems - g.flags, (g.flag_words * 4 + 7) / 8);
  // Sub-chunks hand the sums on per kernel step: a flag per step.
  EXPECT_EQ(fused::backward_workspace(p, 4, 32) - fused::backward_workspace(p, 4),
            4 * 8 * (256 - 128));
}

TEST(BlockHandOff, TicketsInTurnAndAFlagNoBlockReleasedThrows) {
  // The emulator runs blocks one after another, so a wait for a flag that no earlier block has
  // released is what would hang the GPU: it throws, naming the values.
  const cuda::BlockExec ex = cuda::BlockExec::host(256, false);
  int counter = 0, slot = -1, flag = 0;
  EXPECT_EQ(ex.claim_ticket(&counter, &slot), 0);
  EXPECT_EQ(ex.claim_ticket(&counter, &slot), 1);
  EXPECT_NO_THROW(ex.wait_for(&flag, 0));
  try {
    ex.wait_for(&flag, 1);
    ADD_FAILURE() << "waiting for an unreleased flag did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("flag value 1, has 0"), std::string::npos) << e.what();
  }
  ex.release(&flag, 1);
  EXPECT_NO_THROW(ex.wait_for(&flag, 1));
}

// ---- the kernels, emulated, against the fp64 recurrent reference -------------------------------

struct Case {
  const char* name;
  int64_t B, T, H, HV, K, V;
  int chunk;
  int64_t vt;
  bool h0, dht;
  Gates gates;
  int64_t sub = 0;  // the kernels' chunk (0: the chunk itself)
};

const Case kCases[] = {
    {"partial_chunk_h0", 1, 37, 1, 1, 32, 32, 16, 32, true, true, Gates::realistic},
    {"gva_k_ne_v_three_tiles", 2, 70, 1, 2, 16, 48, 32, 16, true, true, Gates::realistic},
    {"two_tiles_no_state_io", 1, 64, 2, 2, 64, 64, 64, 32, false, false, Gates::realistic},
    {"strong_decay_c64", 1, 100, 1, 1, 32, 16, 64, 16, true, true, Gates::strong_decay},
    {"t_lt_c_beta_one", 1, 9, 1, 2, 16, 32, 32, 32, false, true, Gates::beta_one},
};

Problem problem_of(const Case& c) {
  Problem p = shape(c.B, c.T, c.H, c.HV, c.K, c.V, c.chunk);
  p.has_h0 = c.h0;
  p.want_ht = c.dht;
  return p;
}

template <typename T, size_t N>
void check_against_reference(const Case (&cases)[N], double tol) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Problem p = problem_of(c);
    const Data d = make_data(p, c.gates, 77 + c.T);
    const Data seen = std::is_same_v<T, double> ? d : round_to<T>(d);
    const Result got = run_fused_emulated<T>(p, c.vt, d, false, c.sub);
    expect_close(got, reference(p, seen), tol);
  }
}

TEST(FusedEmulation, Fp64MatchesTheRecurrentReference) {
  check_against_reference<double>(kCases, 1e-10);
}

TEST(FusedEmulation, Fp32MatchesTheRecurrentReference) {
  check_against_reference<float>(kCases, 1e-5);
}

// bf16: the products run on tensor cores from bf16-rounded operands (the state, A, Y, Vn, ...
// are rounded where they enter a product, as flash-linear-attention's kernels do), so the error
// is that of bf16 arithmetic, not only of bf16 inputs.
TEST(FusedEmulation, Bf16TensorCorePathMatchesTheRecurrentReference) {
  check_against_reference<bf16>(kCases, 1e-2);
}

TEST(FusedEmulation, ThreadOrderDoesNotMatter) {
  for (const Case& c : {kCases[1], kCases[3]}) {
    SCOPED_TRACE(c.name);
    const Problem p = problem_of(c);
    const Data d = make_data(p, c.gates, 5);
    const Result fwd32 = run_fused_emulated<float>(p, c.vt, d, false);
    const Result rev32 = run_fused_emulated<float>(p, c.vt, d, true);
    expect_close(rev32, fwd32, 0);
    const Result fwd16 = run_fused_emulated<bf16>(p, c.vt, d, false);
    const Result rev16 = run_fused_emulated<bf16>(p, c.vt, d, true);
    expect_close(rev16, fwd16, 0);
  }
}

TEST(FusedEmulation, EveryTileWidthGivesTheSameGradients) {
  // V = 64 as one tile, two or four: the partial sums over tiles add up to the same result.
  Problem p = shape(1, 50, 1, 2, 16, 64, 16);
  p.has_h0 = p.want_ht = true;
  const Data d = make_data(p, Gates::realistic, 11);
  const Result ref = reference(p, d);
  for (int64_t vt : {16, 32, 64}) {
    SCOPED_TRACE(vt);
    expect_close(run_fused_emulated<double>(p, vt, d, false), ref, 1e-10);
  }
}

// ---- the gate gradient under strong decay ------------------------------------------------------

// Every step's log decay in [-5, -4] over whole chunks, and a large state gradient into the last
// chunk (dht x 1000, as a long future accumulates it): s_i = e_i rowsum(K dS' o Vn)_i is then
// large at the chunk's end (e_i = Gam_{C-1,i}) while the early rows' dg stays ~1e-3. Formed as
// sum(s) - sum_{i >= t} s_i, dg_t carries the fp32 rounding of sum(s); with s in X's last row
// (the CPU's order, kernel_math.h: gate_grad_at) no such term is formed. The error of each
// chunk's early rows (its first half) is taken against their own size: expect_close's
// max|err| / max|ref| is set by the last rows and cannot see it.
// Measured: the fp32 kernel 3.4e-6 (the old form 5.1e-4; on bf16 inputs 1.2e-4), bf16 tensor
// cores 4.2e-3 on either form (bf16's own rounding hides it here; at dht x 1e4 the old form gave
// 7.7e-3).
double early_rows_error(const Vec& got, const Vec& ref, int64_t C) {
  double worst = 0;
  for (size_t c0 = 0; c0 < ref.size(); c0 += size_t(C)) {
    double err = 0, size = 0;
    for (size_t t = c0; t < c0 + size_t(C / 2) && t < ref.size(); ++t) {
      err = std::max(err, std::abs(got[t] - ref[t]));
      size = std::max(size, std::abs(ref[t]));
    }
    worst = std::max(worst, err / size);
  }
  return worst;
}

// The early rows' dg error of the fused kernel on T, its inputs rounded to In first.
template <typename T, typename In = T>
double strong_decay_dg_error(int64_t vt) {
  Problem p = shape(1, 256, 1, 1, 32, 32, 64);  // four whole chunks
  p.has_h0 = p.want_ht = true;
  Data d = make_data(p, Gates::realistic, 2026);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> decay(-5, -4);
  for (double& g : d.g) g = decay(rng);
  for (double& x : d.dht) x *= 1000;
  d = round_to<In>(d);
  const Result got = run_fused_emulated<T>(p, vt, d);
  return early_rows_error(got.dg, reference(p, round_to<T>(d)).dg, p.chunk);
}

TEST(FusedEmulation, GateGradientKeepsItsDigitsUnderStrongDecay) {
  for (int64_t vt : {32, 16}) {  // one V tile, and two whose partial sums add up
    SCOPED_TRACE(vt);
    EXPECT_LE(strong_decay_dg_error<float>(vt), 2e-5);
    EXPECT_LE((strong_decay_dg_error<float, bf16>(vt)), 2e-5);  // bf16 inputs, fp32 kernel
    EXPECT_LE(strong_decay_dg_error<bf16>(vt), 1e-2);           // bf16 tensor-core path
  }
}

// ---- sub-chunks: the kernels step through each chunk in R parts ---------------------------------

// T not a multiple of the chunk or the sub-chunk, GVA with several V tiles, K != V, R = 2 and 4.
const Case kSubCases[] = {
    {"c64_sub32_partial", 1, 150, 1, 1, 32, 32, 64, 32, true, true, Gates::realistic, 32},
    {"c64_sub16_gva_tiles", 1, 77, 1, 2, 16, 32, 64, 16, true, true, Gates::realistic, 16},
    {"c32_sub16_k_ne_v", 2, 45, 1, 1, 48, 16, 32, 16, false, true, Gates::strong_decay, 16},
};

TEST(FusedSubChunks, MatchTheRecurrentReference) {
  check_against_reference<double>(kSubCases, 1e-10);
  check_against_reference<float>(kSubCases, 1e-5);
  check_against_reference<bf16>(kSubCases, 1e-2);
}

TEST(FusedSubChunks, TheRtx3090PlanMatchesTheReference) {
  // K = V = 128, C = 64 with the tile and sub-chunk a 99 KiB part's plan picks for the backward
  // (the forward run the same way), every dtype.
  Problem p = shape(1, 100, 1, 1, 128, 128, 64);
  p.has_h0 = p.want_ht = true;
  const Data d = make_data(p, Gates::realistic, 13);
  for (int64_t in_bytes : {2, 4}) {
    const fused::Plan pl = fused::plan(p, true, in_bytes, kRtx3090Smem, kRtx3090Sms);
    ASSERT_TRUE(pl.ok) << pl.why;
    ASSERT_EQ(pl.sub, 32);
    if (in_bytes == 2) {
      expect_close(run_fused_emulated<bf16>(p, pl.vt, d, false, pl.sub),
                   reference(p, round_to<bf16>(d)), 1e-2);
    } else {
      expect_close(run_fused_emulated<float>(p, pl.vt, d, false, pl.sub),
                   reference(p, round_to<float>(d)), 1e-5);
    }
  }
}

TEST(FusedSubChunks, TheResidualHoldsTheChunkStartStates) {
  // The forward in sub-chunks saves every R-th state: the residual of the Problem's chunk, as the
  // forward in whole chunks writes it, so either backward (or chunked) can read it.
  for (const Case& c : kSubCases) {
    SCOPED_TRACE(c.name);
    const Problem p = problem_of(c);
    const Data d = make_data(p, c.gates, 3);
    const Inputs<double> in{d.q.data(), d.k.data(),    d.v.data(),
                            d.g.data(), d.beta.data(), p.has_h0 ? d.h0.data() : nullptr};
    std::vector<double> residual[2], o[2], ht[2];
    for (int i = 0; i < 2; ++i) {
      residual[i].assign(residual_elems(p), std::nan(""));
      o[i].resize(d.v.size());
      ht[i].resize(p.B * p.HV * p.K * p.V);
      fused::emulate_forward<double>(
          p, c.vt, in, ForwardOutputs<double>{o[i].data(), ht[i].data(), residual[i].data()}, false,
          i == 0 ? 0 : c.sub);
    }
    for (size_t x = 0; x < residual[0].size(); ++x)
      ASSERT_NEAR(residual[1][x], residual[0][x], 1e-12 * (1 + std::abs(residual[0][x])))
          << "residual element " << x;
    EXPECT_LE(rel_err(o[1], o[0]), 1e-12);
    EXPECT_LE(rel_err(ht[1], ht[0]), 1e-12);
  }
}

TEST(FusedSubChunks, ThreadOrderDoesNotMatter) {
  const Case& c = kSubCases[1];
  const Problem p = problem_of(c);
  const Data d = make_data(p, c.gates, 9);
  expect_close(run_fused_emulated<float>(p, c.vt, d, true, c.sub),
               run_fused_emulated<float>(p, c.vt, d, false, c.sub), 0);
  expect_close(run_fused_emulated<bf16>(p, c.vt, d, true, c.sub),
               run_fused_emulated<bf16>(p, c.vt, d, false, c.sub), 0);
}

// ---- packed sequences: one grid over (sequence, value head, V tile) ----------------------------

struct PackedCase : PackedSizes {
  int64_t vt, sub;
  Gates gates;
};

// The packed lengths in whole chunks, in sub-chunks (R = 2 and 4: the residual's states and the
// flags at every R-th step of each sequence), with GVA and several V tiles.
std::vector<PackedCase> packed_cases() {
  return {
      {"mixed_gva_c64", kMixedLens, 1, 2, 32, 48, 64, 16, 0, Gates::realistic},
      {"mixed_c16", kMixedLens, 1, 1, 16, 32, 16, 32, 0, Gates::realistic},
      {"mixed_c64_sub32_tiles", kMixedLens, 1, 2, 32, 32, 64, 16, 32, Gates::realistic},
      {"short_c32_gva_tiles", kShortLens, 1, 2, 16, 32, 32, 16, 0, Gates::realistic},
      {"short_c64_sub16_strong", kShortLens, 2, 2, 32, 32, 64, 16, 16, Gates::strong_decay},
  };
}

// Packed = each sequence alone: against the fp64 reference within the dtype's tolerance, and bit
// for bit against the same kernels run on each sequence unpacked (the packed grid changes where a
// block reads and writes, never what it computes).
template <typename T>
void check_packed(const PackedCase& c, double tol) {
  SCOPED_TRACE(c.name);
  const Problem p = packed_problem(c.lens, c.H, c.HV, c.K, c.V, c.chunk, Impl::fused);
  const Data d = make_packed_data(p, c.gates, 91 + c.chunk);
  const Data seen = std::is_same_v<T, double> ? d : round_to<T>(d);
  const Result got = run_fused_emulated<T>(p, c.vt, d, false, c.sub);
  expect_close(got, reference_by_sequence(p, seen), tol);
  const Result alone = by_sequence(p, d, [&](const Problem& one, const Data& dn) {
    return run_fused_emulated<T>(one, c.vt, dn, false, c.sub);
  });
  expect_close(got, alone, 0, false, "packed vs each sequence emulated alone");
}

TEST(FusedPacked, EqualsEachSequenceAloneFp64) {
  for (const PackedCase& c : packed_cases()) check_packed<double>(c, 1e-10);
}

// fp32 against the reference on realistic gates: under strong decay the fp32 rounding of the
// unpacked kernels alone is 1.1e-5 in dg on these lengths, so there the packing is checked bit
// for bit against each sequence alone (below) and in fp64.
TEST(FusedPacked, EqualsEachSequenceAloneFp32) {
  for (const PackedCase& c : packed_cases())
    if (c.gates == Gates::realistic) check_packed<float>(c, 1e-5);
}

TEST(FusedPacked, EqualsEachSequenceAloneBf16TensorCores) {
  for (const PackedCase& c : packed_cases()) check_packed<bf16>(c, 1e-2);
}

TEST(FusedPacked, StrongDecayEqualsEachSequenceEmulatedAlone) {
  for (const PackedCase& c : packed_cases()) {
    if (c.gates != Gates::strong_decay) continue;
    SCOPED_TRACE(c.name);
    const Problem p = packed_problem(c.lens, c.H, c.HV, c.K, c.V, c.chunk, Impl::fused);
    const Data d = make_packed_data(p, c.gates, 91 + c.chunk);
    const Result alone = by_sequence(p, d, [&](const Problem& one, const Data& dn) {
      return run_fused_emulated<float>(one, c.vt, dn, false, c.sub);
    });
    expect_close(run_fused_emulated<float>(p, c.vt, d, false, c.sub), alone, 0);
  }
}

TEST(FusedPacked, WithoutStateInputsOrOutputs) {
  const Problem p = packed_problem(kShortLens, 1, 2, 16, 32, 16, Impl::fused, false);
  const Data d = make_packed_data(p, Gates::realistic, 8);
  expect_close(run_fused_emulated<double>(p, 16, d), reference_by_sequence(p, d), 1e-10);
}

TEST(FusedPacked, ThreadOrderDoesNotMatter) {
  const PackedCase c = packed_cases()[4];
  const Problem p = packed_problem(c.lens, c.H, c.HV, c.K, c.V, c.chunk, Impl::fused);
  const Data d = make_packed_data(p, c.gates, 12);
  expect_close(run_fused_emulated<float>(p, c.vt, d, true, c.sub),
               run_fused_emulated<float>(p, c.vt, d, false, c.sub), 0);
}

TEST(FusedPacked, OneSequenceIsTheUnpackedRunBitForBit) {
  // The table's single span gives the same tokens, states and flags the unpacked arithmetic does.
  const Problem packed = packed_problem({100}, 1, 2, 32, 32, 32, Impl::fused);
  Problem unpacked = packed;
  unpacked.cu_seqlens.clear();
  const Data d = make_packed_data(packed, Gates::realistic, 4);
  for (int64_t sub : {0, 16}) {
    SCOPED_TRACE(sub);
    expect_close(run_fused_emulated<float>(packed, 16, d, false, sub),
                 run_fused_emulated<float>(unpacked, 16, d, false, sub), 0);
  }
}

TEST(FusedPacked, MaxHeadDimsK256V512) {
  // fla's default GatedDeltaNetConfig (head_dim 256, expand_v 2): eight V tiles of 64, the
  // sub-chunk of 32 the fp32 backward takes on an H200.
  const Problem p = packed_problem(kMixedLens, 1, 1, 256, 512, 64, Impl::fused);
  const Data d = make_packed_data(p, Gates::realistic, 256);
  expect_close(run_fused_emulated<double>(p, 64, d), reference_by_sequence(p, d), 1e-10);
  expect_close(run_fused_emulated<float>(p, 64, d, false, 32),
               reference_by_sequence(p, round_to<float>(d)), 1e-5);
  const Problem short_p = packed_problem(kShortLens, 1, 1, 256, 512, 16, Impl::fused);
  const Data ds = make_packed_data(short_p, Gates::realistic, 257);
  expect_close(run_fused_emulated<double>(short_p, 64, ds), reference_by_sequence(short_p, ds),
               1e-10);
}

TEST(FusedPacked, PlanCoversEverySequenceAndV512) {
  Problem p = packed_problem(kShortLens, 2, 4, 256, 512, 64, Impl::fused);
  for (bool backward : {false, true})
    for (int64_t in_bytes : {2, 4}) {
      const fused::Plan pl = fused::plan(p, backward, in_bytes, kH200Smem, kH200Sms);
      ASSERT_TRUE(pl.ok) << pl.why;
      EXPECT_EQ(pl.tiles * pl.vt, 512);
      EXPECT_EQ(pl.blocks, 7 * 4 * pl.tiles);  // (sequence, value head, V tile)
      EXPECT_EQ(fused::dims_of(p, pl.vt, pl.sub).blocks(), pl.blocks);
    }
}

// The index arithmetic of the packed grid: every chunk-start state of every (sequence, value head)
// has its own K x V place inside the residual, and every step of every (sequence, key head) its
// own flag before the ticket counter; without packing the places are the unpacked layout's.
TEST(FusedPacked, StatesAndFlagsHaveOnePlaceEach) {
  for (int64_t sub : {0, 32, 16}) {
    SCOPED_TRACE(sub);
    const Problem p = packed_problem({1, 63, 2, 130, 64, 65}, 2, 6, 16, 32, 64, Impl::fused);
    const std::vector<cuda_seqs::SeqSpan> spans = cuda_seqs::seq_spans(p);
    ASSERT_EQ(spans.size(), 6u);
    const fused::Dims d = fused::dims_of(p, 16, sub, spans.data());
    const fused::BackwardWorkspace w(d, 4);
    const int64_t KV = p.K * p.V;
    std::set<int64_t> states, flags;
    int64_t tokens = 0;
    for (int64_t n = 0; n < d.N; ++n) {
      const cuda_seqs::SeqSpan q = d.seq(n);
      EXPECT_EQ(q.t0, tokens);
      tokens += q.len;
      int64_t rows = 0;
      for (int64_t c = 0; c < d.steps(q); ++c) {
        const fused::StepRows at = fused::step_rows(d, q, c);
        EXPECT_EQ(at.tok, q.t0 + rows);
        EXPECT_GE(at.rows, 1);
        EXPECT_LE(at.rows, d.C);
        rows += at.rows;
        for (int64_t hv = 0; hv < p.HV; ++hv)
          if (c % d.R == 0) {
            const int64_t at_state = d.state_at(q, hv, c);
            EXPECT_EQ(at_state % KV, 0);
            EXPECT_TRUE(states.insert(at_state).second)
                << "seq " << n << " hv " << hv << " c " << c;
          }
        for (int64_t h = 0; h < p.H; ++h) {
          const int64_t flag = d.flags_at(q, h) + c;
          EXPECT_LT(flag, w.counter);
          EXPECT_TRUE(flags.insert(flag).second) << "seq " << n << " h " << h << " step " << c;
        }
      }
      EXPECT_EQ(rows, q.len);
    }
    EXPECT_EQ(tokens, p.T);
    EXPECT_EQ(int64_t(states.size()), p.HV * p.total_chunks());
    EXPECT_EQ(*states.rbegin() + KV, residual_elems(p));
  }
  // Unpacked (B rows of T): the spans computed, the places those of [B, HV, NR] states.
  const Problem u = shape(3, 100, 1, 2, 16, 16, 32);
  const fused::Dims du = fused::dims_of(u, 16, 16);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t hv = 0; hv < 2; ++hv)
      for (int64_t c = 0; c < du.NT(); c += du.R) {
        const cuda_seqs::SeqSpan q = du.seq(b);
        EXPECT_EQ(q.t0, b * 100);
        EXPECT_EQ(du.state_at(q, hv, c), ((b * 2 + hv) * du.NR + c / du.R) * 256);
      }
}

TEST(FusedPacked, SequenceTableFollowsTheScratch) {
  const Problem p = packed_problem(kShortLens, 1, 1, 16, 16, 16, Impl::fused);
  EXPECT_EQ(cuda_seqs::seq_table_elems(p), 48);  // 7 spans of 24 bytes in 4-byte units, to 16
  EXPECT_EQ(cuda_seqs::with_seq_table(p, 100), 112 + 48);
  Problem u = p;
  u.cu_seqlens.clear();
  u.T = 20;
  EXPECT_EQ(cuda_seqs::seq_table_elems(u), 0);
  EXPECT_EQ(cuda_seqs::with_seq_table(u, 100), 100);  // unpacked: no table, the same workspace
  EXPECT_TRUE(cuda_seqs::seq_spans(u).empty());
  EXPECT_EQ(cuda_seqs::longest_seq(p), 23);
}

TEST(PackedResidual, ChunkedFullPartsTileThePackedLayout) {
  // CUDA chunked runs a packed Problem one sequence at a time; under `full` each sequence's
  // states, A and [W | U] are copied to their places in the packed layout the chunked buffers
  // carve (ChunkedLayout: all states, then all A, then all [W | U], each [sequence][head][chunk]).
  Problem p = packed_problem(kMixedLens, 1, 2, 16, 32, 32, Impl::chunked);
  p.residual = Residual::full;
  const Sequences s = sequences(p);
  std::vector<int> owners(residual_elems(p), 0);
  for (int64_t n = 0; n < s.count(); ++n) {
    const Problem one = detail::sequence_problem(p, s, n);
    int64_t alone = 0;
    for (const cuda_seqs::ResidualPart& part : cuda_seqs::full_residual_parts(p, s, n)) {
      EXPECT_EQ(part.alone_at, alone) << "sequence " << n;
      alone += part.elems;
      for (int64_t x = part.packed_at; x < part.packed_at + part.elems; ++x) owners[x]++;
    }
    EXPECT_EQ(alone, residual_elems(one)) << "sequence " << n;
    const auto parts = cuda_seqs::full_residual_parts(p, s, n);
    const int64_t tile = detail::chunk_tile(s.chunk[n], s.chunks(n), p.HV, 0, 0);
    EXPECT_EQ(parts[0].packed_at, tile * p.K * p.V);
    EXPECT_EQ(parts[1].packed_at, detail::states_elems(p) + tile * p.chunk * p.chunk);
  }
  for (size_t x = 0; x < owners.size(); ++x) ASSERT_EQ(owners[x], 1) << "residual element " << x;
  std::vector<double> residual(residual_elems(p));
  const detail::ChunkedLayout<double> w(p, nullptr, residual.data(), false,
                                        detail::ChunkedSide::cuda);
  EXPECT_EQ(w.a - residual.data(), cuda_seqs::full_residual_parts(p, s, 0)[1].packed_at);
  EXPECT_EQ(w.wu - residual.data(), cuda_seqs::full_residual_parts(p, s, 0)[2].packed_at);
}

}  // namespace
}  // namespace gdn::gdr
