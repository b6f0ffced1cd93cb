// Packed sequences (Problem::cu_seqlens) on CUDA: every implementation (recurrent, chunked with
// both residual policies, fused, ssd), fp64, fp32 and bf16, against each sequence run alone by
// the CPU fp64 kernels (tests/packed_test_util.h), for o, ht and every gradient, on the packed
// lengths {1, 63, 2, 130} (lengths of 1 and 2, no multiple of any chunk, one over two chunks) and
// {5, 7, 11, 13, 17, 19, 23} (many sequences in one chunk), and one sequence (= the unpacked run,
// bit for bit); the fused kernels against their emulation with packing at every V tile and
// sub-chunk; their fallback to chunked; determinism; K = 256, V = 512. Recurrent, ssd and fused run
// every sequence in one launch set (gdr_seqs.h); chunked one sequence at a time
// (kernels/gdr_split.h). Tolerances as test_cuda_gdr's. Label `gpu`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/gated_delta_rule.h"
#include "src/ops/ops.h"
#include "tests/cuda_gdr_run.h"
#include "tests/fused_test_util.h"
#include "tests/gdr_test_data.h"
#include "tests/packed_test_util.h"
#include "tests/test_util.h"

GDN_TEST_REQUIRES_CUDA();

#if defined(GDN_WITH_CUDA)
namespace gdn::gdr {
namespace {

using namespace cuda_run;  // and test_data

struct Variant {
  Impl impl;
  Residual residual;
};
const Variant kVariants[] = {{Impl::recurrent, Residual::minimal},
                             {Impl::chunked, Residual::minimal},
                             {Impl::chunked, Residual::full},
                             {Impl::fused, Residual::minimal},
                             {Impl::ssd, Residual::minimal}};

std::string label(const Variant& v, const char* dt, int chunk, const std::string& lens) {
  return std::string(impl_name(v.impl)) + "/" + residual_name(v.residual) + " " + dt + " C" +
         std::to_string(chunk) + " lens " + lens;
}

std::string lens_text(const std::vector<int64_t>& lens) {
  std::string s;
  for (int64_t l : lens) s += (s.empty() ? "" : ",") + std::to_string(l);
  return s;
}

// Every variant and dtype on one set of lengths: packed on CUDA = each sequence alone (CPU fp64).
void check_lens(const std::vector<int64_t>& lens, int64_t H, int64_t HV, int64_t K, int64_t V,
                const std::vector<int>& chunks, bool with_f64) {
  const std::string lt = lens_text(lens);
  for (bool ssd : {false, true}) {
    const Problem base = packed_problem(lens, H, HV, K, V, 64, ssd ? Impl::ssd : Impl::recurrent);
    const Data d = make_packed_data(base, Gates::realistic, 300 + lens.size() + K);
    const Data d32 = round_to<float>(d), d16 = round_to<bf16>(d);
    // the references do not depend on the chunk size
    const Result r64 = with_f64 ? reference_by_sequence(base, d) : Result(),
                 r32 = reference_by_sequence(base, d32), r16 = reference_by_sequence(base, d16);
    for (int chunk : chunks)
      for (const Variant& v : kVariants) {
        if ((v.impl == Impl::ssd) != ssd) continue;
        Problem p = base;
        p.impl = v.impl;
        p.residual = v.residual;
        p.chunk = chunk;
        if (with_f64)
          expect_close(run_cuda<double>(p, d), r64, 1e-9, ssd, label(v, "f64", chunk, lt));
        expect_close(run_cuda<float>(p, d32), r32, 1e-4, ssd, label(v, "f32", chunk, lt));
        expect_close(run_cuda<bf16>(p, d16), r16, 2e-2, ssd, label(v, "bf16", chunk, lt));
      }
  }
}

TEST(CudaPacked, MixedLengthsEveryImplDtypeAndChunk) {
  check_lens(kMixedLens, 1, 2, 32, 48, {16, 32, 64}, true);
}

TEST(CudaPacked, ManyShortSequencesEveryImplDtypeAndChunk) {
  check_lens(kShortLens, 2, 4, 16, 32, {16, 32, 64}, true);
}

TEST(CudaPacked, OneSequenceEqualsTheUnpackedRunBitForBit) {
  for (const Variant& v : kVariants) {
    Problem packed = packed_problem({150}, 1, 2, 32, 32, 32, v.impl);
    packed.residual = v.residual;
    Problem unpacked = packed;
    unpacked.cu_seqlens.clear();
    const Data d = round_to<float>(make_packed_data(packed, Gates::realistic, 7));
    expect_close(run_cuda<float>(packed, d), run_cuda<float>(unpacked, d), 0, v.impl == Impl::ssd,
                 label(v, "f32", 32, "150"));
  }
}

TEST(CudaPacked, BitwiseDeterministic) {
  for (const Variant& v : kVariants) {
    Problem p = packed_problem(kShortLens, 1, 2, 32, 32, 16, v.impl);
    p.residual = v.residual;
    const Data d = round_to<float>(make_packed_data(p, Gates::realistic, 9));
    expect_close(run_cuda<float>(p, d), run_cuda<float>(p, d), 0, v.impl == Impl::ssd,
                 label(v, "f32 twice", 16, lens_text(kShortLens)));
  }
}

// The GPU runs the packed grid the emulator runs: at every V tile width and in sub-chunks (the
// residual's states and the hand-off flags at every R-th step of each sequence).
TEST(CudaPacked, FusedMatchesItsEmulationAtEveryTileAndSubChunk) {
  Problem p = packed_problem(kMixedLens, 1, 2, 32, 64, 64, Impl::fused);
  const Data d = make_packed_data(p, Gates::realistic, 17);
  for (int64_t vt : {16, 32, 64})
    for (int64_t sub : {64, 32, 16}) {
      // the fp32 backward at vt 64 in whole chunks needs 232832 bytes, over an H200's 232448
      if (vt == 64 && sub == 64) continue;
      const std::string what = "vt " + std::to_string(vt) + " sub " + std::to_string(sub);
      p.fused_vt = vt;
      p.fused_sub = sub;
      for (bool backward : {false, true}) {
        const fused::Plan pl = cuda_fused_plan(p, backward, 4);
        ASSERT_TRUE(pl.ok) << what << ": " << pl.why;
        ASSERT_EQ(pl.blocks, 4 * 2 * (64 / vt)) << what;  // (sequence, value head, V tile)
      }
      expect_close(run_cuda<float>(p, round_to<float>(d)),
                   run_fused_emulated<float>(p, vt, d, false, sub), 1e-5, false, "f32 " + what);
      expect_close(run_cuda<bf16>(p, round_to<bf16>(d)),
                   run_fused_emulated<bf16>(p, vt, d, false, sub), 2e-3, false, "bf16 " + what);
    }
}

// A fused plan that does not fit (a forced sub-chunk that does not divide the chunk) runs the
// chunked kernels, sequence by sequence, and says so: still each sequence alone.
TEST(CudaPacked, FusedFallbackToChunkedRunsEachSequence) {
  Problem p = packed_problem(kMixedLens, 1, 2, 32, 32, 64, Impl::fused);
  const Data d = round_to<float>(make_packed_data(p, Gates::realistic, 13));
  p.fused_sub = 48;
  ASSERT_NE(cuda_fused_fallback(p, false, 4), "");
  ASSERT_NE(cuda_fused_fallback(p, true, 4), "");
  const Result got = run_cuda<float>(p, d);
  expect_close(got, reference_by_sequence(p, d), 1e-4, false, "fused fallback f32");
}

// fla's default head sizes. Until validate() takes V = 512 (the CPU side raises the limit) the
// entry points refuse it before any kernel runs, which this test reports as a skip.
TEST(CudaPacked, MaxHeadDimsK256V512) {
  const Problem probe = packed_problem(kMixedLens, 1, 1, 256, 512, 64, Impl::fused);
  try {
    validate(probe);
  } catch (const std::invalid_argument& e) {
    GTEST_SKIP() << "validate() refuses V = 512 on this branch: " << e.what();
  }
  check_lens(kMixedLens, 1, 1, 256, 512, {64}, false);
  check_lens(kShortLens, 1, 1, 256, 512, {16}, false);
}

TEST(CudaPacked, WorkspacesHoldTheSequenceTable) {
  // Native packing needs the table in every workspace (recurrent's forward had none); unpacked
  // sizes are unchanged.
  const Problem p = packed_problem(kShortLens, 1, 2, 32, 32, 32, Impl::recurrent);
  Problem u = p;
  u.cu_seqlens.clear();
  EXPECT_EQ(cuda_forward_workspace_elems(u, 4), 0);
  EXPECT_GE(cuda_forward_workspace_elems(p, 4), 7 * 24 / 4);
  for (Impl impl : {Impl::recurrent, Impl::fused, Impl::ssd}) {
    Problem packed = p, unpacked = u;
    packed.impl = unpacked.impl = impl;
    EXPECT_GE(cuda_backward_workspace_elems(packed, 4) - cuda_backward_workspace_elems(unpacked, 4),
              7 * 24 / 4)
        << impl_name(impl);
  }
}

}  // namespace
}  // namespace gdn::gdr
#endif  // GDN_WITH_CUDA
