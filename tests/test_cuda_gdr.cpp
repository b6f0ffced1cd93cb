// CUDA gated delta rule (kernels/cuda/gdr_*.cu) against the CPU fp64 recurrent reference: every
// implementation (recurrent, chunked with both residual policies, fused, ssd), fp64,
// fp32 and bf16, chunk sizes 16/32/64, forward o and ht and every gradient, on odd shapes
// (T not a multiple of C, T = 1, K != V, GVA with HV = 2H and 4H, h0/dht given or not, strong
// decay, K = V = 256) and the seed's shapes (B=4 H=8 T=512 K=V=64; T=2048 K=V=128);
// determinism (bitwise equal twice); the op wiring through autograd (CUDA op = CPU op); and
// input validation. The fused kernels also against their CPU emulation (the same block code,
// gdr_fused_emulate.h) at every V tile width, and their plan on Hopper-class parts. Tolerances
// by dtype against fp64, never loosened to pass. Label `gpu`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/gated_delta_rule.h"
#include "src/ops/gated_delta_rule.h"
#include "src/ops/ops.h"
#include "tests/cuda_gdr_run.h"
#include "tests/fused_test_util.h"
#include "tests/gdr_test_data.h"
#include "tests/test_util.h"
#if defined(GDN_WITH_CUDA)
#include <cuda_runtime.h>

#include "kernels/cuda/gdr_cuda.h"
#include "src/core/cuda/cuda_context.h"
#endif

GDN_TEST_REQUIRES_CUDA();

#if defined(GDN_WITH_CUDA)
namespace gdn::gdr {
namespace {

using namespace test_data;
using namespace cuda_run;

struct Case {
  const char* name;
  int64_t B, T, H, HV, K, V;
  bool h0, dht;
  Gates gates;
};

Problem problem_for(const Case& c, Impl impl, Residual res, int chunk) {
  Problem p = problem_of(c.B, c.T, c.H, c.HV, c.K, c.V, chunk, impl);
  p.residual = res;
  p.has_h0 = c.h0;
  p.want_ht = c.dht;
  return p;
}

struct Variant {
  Impl impl;
  Residual residual;
};
const Variant kVariants[] = {
    {Impl::recurrent, Residual::minimal},
    {Impl::chunked, Residual::minimal},
    {Impl::chunked, Residual::full},
    {Impl::fused, Residual::minimal},  // its own kernels where the plan fits
    {Impl::ssd, Residual::minimal}};

std::string label(const Case& c, const Variant& v, const char* dt, int chunk) {
  return std::string(c.name) + " " + impl_name(v.impl) + "/" + residual_name(v.residual) + " " +
         dt + " C" + std::to_string(chunk);
}

// Every variant and dtype on one case; the reference is computed once per dtype.
void check_case(const Case& c, const std::vector<int>& chunks, bool with_f64) {
  const Data d =
      make_data(problem_for(c, Impl::recurrent, Residual::minimal, 64), c.gates, 1000 + c.T + c.K);
  const Data d64 = d, d32 = round_to<float>(d), d16 = round_to<bf16>(d);
  for (bool ssd : {false, true}) {
    // The references do not depend on the chunk size.
    const Problem pr = problem_for(c, ssd ? Impl::ssd : Impl::recurrent, Residual::minimal, 64);
    const Result r64 = with_f64 ? reference(pr, d64) : Result(), r32 = reference(pr, d32),
                 r16 = reference(pr, d16);
    for (int chunk : chunks)
      for (const Variant& v : kVariants) {
        if ((v.impl == Impl::ssd) != ssd) continue;
        const Problem p = problem_for(c, v.impl, v.residual, chunk);
        // fp32: another summation order than fp64 (and the chunked form); bf16: the inputs and
        // outputs are rounded to 8 bits of mantissa.
        if (with_f64)
          expect_close(run_cuda<double>(p, d64), r64, 1e-9, false, label(c, v, "f64", chunk));
        expect_close(run_cuda<float>(p, d32), r32, 1e-4, false, label(c, v, "f32", chunk));
        expect_close(run_cuda<bf16>(p, d16), r16, 2e-2, false, label(c, v, "bf16", chunk));
      }
  }
}

TEST(CudaGdr, OddShapesEveryImplDtypeAndChunk) {
  const Case cases[] = {
      {"gva2_k_ne_v_partial", 2, 100, 2, 4, 32, 48, true, true, Gates::realistic},
      {"gva4_partial", 1, 77, 1, 4, 16, 24, true, true, Gates::realistic},
      {"t1", 1, 1, 1, 1, 16, 16, true, true, Gates::realistic},
      {"t_lt_c_no_h0", 1, 10, 1, 2, 8, 12, false, true, Gates::realistic},
      {"no_dht", 1, 128, 2, 2, 16, 16, true, false, Gates::realistic},
      {"no_state_io", 2, 45, 1, 1, 12, 20, false, false, Gates::realistic},
      {"strong_decay", 1, 70, 2, 2, 16, 16, true, true, Gates::strong_decay},
      {"odd_dims", 1, 33, 1, 2, 7, 5, true, true, Gates::realistic},
  };
  for (const Case& c : cases) check_case(c, {16, 32, 64}, true);
}

TEST(CudaGdr, MaxHeadDims) {
  check_case({"k256_v256", 1, 70, 1, 1, 256, 256, true, true, Gates::realistic}, {64}, false);
  check_case({"k256_v128_gva", 1, 40, 1, 2, 256, 128, true, true, Gates::realistic}, {32}, false);
}

TEST(CudaGdr, SeedShapes) {
  check_case({"seed_B4_H8_T512_64", 4, 512, 8, 8, 64, 64, false, false, Gates::realistic}, {64},
             false);
  check_case({"seed_T2048_128", 1, 2048, 2, 2, 128, 128, false, false, Gates::realistic}, {64},
             false);
}

TEST(CudaGdr, BitwiseDeterministic) {
  const Case c{"det", 2, 150, 2, 4, 32, 32, true, true, Gates::realistic};
  const Data d = round_to<float>(
      make_data(problem_for(c, Impl::recurrent, Residual::minimal, 64), Gates::realistic, 5));
  for (const Variant& v : kVariants) {
    const Problem p = problem_for(c, v.impl, v.residual, 32);
    const Result a = run_cuda<float>(p, d), b = run_cuda<float>(p, d);
    for (const auto& [x, y] :
         {std::make_pair(&a.o, &b.o), std::make_pair(&a.ht, &b.ht), std::make_pair(&a.dq, &b.dq),
          std::make_pair(&a.dk, &b.dk), std::make_pair(&a.dv, &b.dv), std::make_pair(&a.dg, &b.dg),
          std::make_pair(&a.dbeta, &b.dbeta), std::make_pair(&a.dh0, &b.dh0)})
      EXPECT_EQ(*x, *y) << impl_name(v.impl) << "/" << residual_name(v.residual);
  }
}

// The op (src/ops/gated_delta_rule.cpp) on CUDA equals the op on the CPU, through autograd,
// including fused (its own kernels and workspace) and h0 / ht.
TEST(CudaGdr, OpThroughAutogradMatchesCpu) {
  Generator gen(21);
  const int64_t B = 2, T = 67, H = 2, HV = 4, K = 16, V = 24;
  auto rnd = [&](const Shape& s, double mul) {
    return ops::mul(ops::randn(s, DType::float32, Device::cpu(), &gen), mul);
  };
  Tensor q = rnd({B, T, H, K}, 1), k = ops::l2_norm(rnd({B, T, H, K}, 1)),
         v = rnd({B, T, HV, V}, 1);
  Tensor g = ops::mul(ops::softplus(rnd({B, T, HV}, 1)), -0.1),
         beta = ops::sigmoid(rnd({B, T, HV}, 1));
  Tensor h0 = rnd({B, HV, K, V}, 0.5), d_o = rnd({B, T, HV, V}, 1), dht = rnd({B, HV, K, V}, 1);
  for (gdr::Impl impl : {Impl::recurrent, Impl::chunked, Impl::fused, Impl::ssd}) {
    std::vector<std::vector<double>> results[2];
    for (int dev = 0; dev < 2; ++dev) {
      const Device device = dev ? kCuda : Device::cpu();
      std::vector<Tensor> in;
      for (const Tensor& t : {q, k, v, g, beta, h0})
        in.push_back(ops::to_device(t, device).detach().set_requires_grad(true));
      ops::GdrOptions opt;
      opt.impl = impl;
      opt.chunk_size = 32;
      opt.output_final_state = true;
      ops::GdrOutput out = ops::gated_delta_rule(in[0], in[1], in[2], in[3], in[4], opt, in[5]);
      Tensor loss = ops::add(ops::sum(ops::mul(out.o, ops::to_device(d_o, device))),
                             ops::sum(ops::mul(out.ht, ops::to_device(dht, device))));
      loss.backward();
      results[dev].push_back(out.o.to_vector());
      results[dev].push_back(out.ht.to_vector());
      for (size_t i = 0; i < in.size(); ++i)
        if (impl != Impl::ssd || i != 4) results[dev].push_back(in[i].grad().to_vector());
    }
    for (size_t i = 0; i < results[0].size(); ++i)
      EXPECT_LE(test::rel_err(results[1][i], results[0][i]), 1e-4)
          << impl_name(impl) << " output/grad #" << i;
  }
}

// The GPU runs the block code the CPU emulator runs: the two agree to rounding (the order of the
// tensor cores' sums, expf vs std::exp), at every V tile width (Problem::fused_vt).
TEST(CudaGdrFused, MatchesItsCpuEmulationAtEveryTileWidth) {
  const Case c{"fused_emulation", 2, 90, 1, 2, 32, 64, true, true, Gates::realistic};
  Problem p = problem_for(c, Impl::fused, Residual::minimal, 32);
  const Data d = make_data(p, c.gates, 17);
  for (int64_t vt : {16, 32, 64}) {
    const std::string vt_s = std::to_string(vt);
    p.fused_vt = vt;
    ASSERT_EQ(cuda_fused_fallback(p, false, 4), "") << "vt " << vt;
    ASSERT_EQ(cuda_fused_fallback(p, true, 4), "") << "vt " << vt;
    expect_close(run_cuda<float>(p, round_to<float>(d)), run_fused_emulated<float>(p, vt, d), 1e-5,
                 false, "f32 vt " + vt_s);
    expect_close(run_cuda<bf16>(p, round_to<bf16>(d)), run_fused_emulated<bf16>(p, vt, d), 2e-3,
                 false, "bf16 vt " + vt_s);
    expect_close(run_cuda<double>(p, d), run_fused_emulated<double>(p, vt, d), 1e-12, false,
                 "f64 vt " + vt_s);
  }
}

// More blocks than the GPU holds at once (1536 at vt = 16: 48 x 8 value heads x 4 tiles, GVA
// groups of 2 chaining 8 blocks), so blocks handing their running sums on start in several waves:
// the backward must finish, match the reference as the other tests' fp32 runs do, and give the
// same bits twice.
TEST(CudaGdrFused, RunningSumsAcrossWavesOfBlocks) {
  const Case c{"waves", 48, 70, 4, 8, 32, 64, true, true, Gates::realistic};
  Problem p = problem_for(c, Impl::fused, Residual::minimal, 32);
  const Data d = round_to<float>(make_data(p, c.gates, 29));
  p.fused_vt = 16;
  ASSERT_EQ(cuda_fused_fallback(p, true, 4), "");
  const Result first = run_cuda<float>(p, d), second = run_cuda<float>(p, d);
  expect_close(first, reference(problem_for(c, Impl::recurrent, Residual::minimal, 32), d), 1e-4,
               false, "fused f32");
  expect_close(second, first, 0, false, "fused twice");
}

// A chunk the kernels step through in sub-chunks (what a part with too little shared memory for
// C = 64 picks by itself; forced here by Problem::fused_sub): the backward recomputes the states
// inside each chunk, and the GPU agrees with its emulation.
TEST(CudaGdrFused, SubChunksMatchTheirEmulation) {
  const Case c{"sub_chunks", 2, 150, 1, 2, 32, 64, true, true, Gates::realistic};
  Problem p = problem_for(c, Impl::fused, Residual::minimal, 64);
  const Data d = make_data(p, c.gates, 41);
  p.fused_vt = 32;
  for (int64_t sub : {32, 16}) {
    const std::string sub_s = std::to_string(sub);
    p.fused_sub = sub;
    for (bool backward : {false, true}) {
      const fused::Plan pl = cuda_fused_plan(p, backward, 4);
      ASSERT_TRUE(pl.ok) << pl.why;
      ASSERT_EQ(pl.sub, sub);
    }
    expect_close(run_cuda<float>(p, round_to<float>(d)),
                 run_fused_emulated<float>(p, 32, d, false, sub), 1e-5, false, "f32 sub " + sub_s);
    expect_close(run_cuda<bf16>(p, round_to<bf16>(d)),
                 run_fused_emulated<bf16>(p, 32, d, false, sub), 2e-3, false, "bf16 sub " + sub_s);
  }
}

TEST(CudaGdrFused, SeedShapesRunFusedOnHopperClassParts) {
  int dev = 0, smem = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
            cudaSuccess);
  if (smem < 232448) GTEST_SKIP() << "shared memory per block " << smem << " < 227 KiB";
  for (int64_t D : {64, 128}) {
    const Case c{"seed", 4, 8192, 8, 8, D, D, false, false, Gates::realistic};
    const Problem p = problem_for(c, Impl::fused, Residual::minimal, 64);
    for (bool backward : {false, true})
      for (int64_t in_bytes : {2, 4})
        EXPECT_EQ(cuda_fused_fallback(p, backward, in_bytes), "")
            << "D " << D << " bwd " << backward << " input bytes " << in_bytes;
  }
}

TEST(CudaGdr, RejectsBadArguments) {
  Problem p = problem_for({"v", 1, 8, 1, 1, 8, 8, false, false, Gates::realistic}, Impl::chunked,
                          Residual::minimal, 16);
  Inputs<float> in{};  // all null
  EXPECT_THROW(forward_cuda<float>(p, in, ForwardOutputs<float>{}, cuda::current_stream(0)),
               std::invalid_argument);
  p.K = 300;
  EXPECT_THROW(forward_cuda<float>(p, in, ForwardOutputs<float>{}, cuda::current_stream(0)),
               std::invalid_argument);
}

}  // namespace
}  // namespace gdn::gdr
#endif  // GDN_WITH_CUDA
