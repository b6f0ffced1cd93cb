// Tests of the CPU Kimi Delta Attention kernels (kernels/kda.h) and their op
// (src/ops/kimi_delta_rule.h): the recurrent kernel against an fp64 naive loop written in the
// test, fp64 finite differences of every input of every implementation, every implementation,
// dtype and chunk size against the fp64 recurrent reference (o, ht and every gradient) with GVA,
// h0, packed sequences and strong per-channel decays, packed = each sequence alone, the op's
// autograd gradcheck, shapes on meta, and validation messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "src/autograd/gradcheck.h"
#include "src/ops/kimi_delta_rule.h"
#include "src/ops/ops.h"
#include "tests/kda_test_data.h"
#include "tests/test_helpers.h"

namespace gdn::kda {
namespace {

using namespace test_data;

Problem with_impl(Problem p, Impl impl) {
  p.impl = impl;
  return p;
}

// The recurrent kernel's forward in fp64 is the naive loop's, to rounding.
TEST(KdaKernels, RecurrentForwardMatchesNaiveLoop) {
  const Problem cases[] = {
      problem(2, 37, 2, 4, 8, 6, 16, Impl::recurrent, true, true),
      problem(1, 40, 1, 2, 8, 5, 32, Impl::recurrent, true, true, {0, 9, 25, 40}),
      problem(2, 20, 1, 1, 4, 4, 64, Impl::recurrent, false, false),
  };
  for (const Problem& p : cases)
    for (double g_min : {-0.2, -5.0}) {
      const Data d = make_data(p, g_min, 7);
      expect_close(run_cpu<double>(p, d, false), naive_forward(p, d), 1e-13,
                   "recurrent fp64 vs naive, g_min " + std::to_string(g_min), false);
    }
}

// d(sum(o d_o) + sum(ht dht)) / dx by central differences of the naive loop against every
// gradient of every implementation, fp64: every element of every input.
void check_finite_differences(const Problem& p, double g_min, uint64_t seed) {
  const Data d = make_data(p, g_min, seed);
  const Result r = run_cpu<double>(p, d);
  struct Input {
    const char* name;
    Vec Data::*field;
    const Vec* grad;
  };
  const Input inputs[] = {{"q", &Data::q, &r.dq},          {"k", &Data::k, &r.dk},
                          {"v", &Data::v, &r.dv},          {"g", &Data::g, &r.dg},
                          {"beta", &Data::beta, &r.dbeta}, {"h0", &Data::h0, &r.dh0}};
  const double eps = 1e-6;
  for (const Input& in : inputs) {
    const Vec& x = d.*in.field;
    ASSERT_EQ(in.grad->size(), x.size()) << in.name;
    double max_err = 0, max_grad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      Data e = d;
      (e.*in.field)[i] += eps;
      const double up = naive_loss(p, e);
      (e.*in.field)[i] -= 2 * eps;
      const double fd = (up - naive_loss(p, e)) / (2 * eps);
      max_err = std::max(max_err, std::abs(fd - (*in.grad)[i]));
      max_grad = std::max(max_grad, std::abs(fd));
    }
    EXPECT_LE(max_err, 1e-7 * std::max(1.0, max_grad))
        << impl_name(p.impl) << " C=" << p.chunk << " g_min " << g_min << ": d" << in.name
        << " max err " << max_err << " (max |grad| " << max_grad << ")";
    EXPECT_GT(max_grad, 0) << in.name << ": a gradient that is all zero checks nothing";
  }
}

TEST(KdaKernels, FiniteDifferencesEveryInputEveryImplementation) {
  for (const Implementation& impl : implementations())
    for (int chunk : {16, 32, 64}) {
      SCOPED_TRACE(impl.name);
      // GVA (2 value heads per key head), h0 and ht, T not a multiple of the chunk
      check_finite_differences(problem(2, 21, 1, 2, 4, 3, chunk, impl.impl, true, true), -0.3, 1);
      // packed sequences (one longer than a chunk), strong decays
      check_finite_differences(
          problem(1, 45, 1, 2, 4, 3, chunk, impl.impl, true, true, {0, 5, 39, 45}), -5, 2);
    }
}

// Each implementation, dtype and chunk size against the fp64 recurrent kernel (itself checked
// above): fp64 to 1e-10, fp32 to 5e-5, bf16 to a sanity bound.
TEST(KdaKernels, EveryImplementationMatchesFp64Recurrent) {
  const Problem shapes[] = {
      problem(2, 150, 2, 4, 16, 12, 64, Impl::recurrent, true, true),
      problem(1, 150, 1, 2, 32, 16, 64, Impl::recurrent, true, true, {0, 17, 80, 81, 150}),
  };
  for (const Problem& shape : shapes)
    for (double g_min : {-0.1, -1.0, -5.0})
      for (int chunk : {16, 32, 64}) {
        Problem base = shape;
        base.chunk = chunk;
        const Data d = make_data(base, g_min, 11);
        const Result ref = run_cpu<double>(with_impl(base, Impl::recurrent), d);
        for (const Implementation& impl : implementations()) {
          const Problem p = with_impl(base, impl.impl);
          const std::string what = std::string(impl.name) + " C=" + std::to_string(chunk) +
                                   " g_min " + std::to_string(g_min) +
                                   (p.packed() ? " packed" : "");
          expect_close(run_cpu<double>(p, d), ref, 1e-10, what + " fp64");
          expect_close(run_cpu<float>(p, d), ref, 5e-5, what + " fp32");
          expect_close(run_cpu<bf16>(p, d), ref, 2e-2, what + " bf16");
        }
      }
}

// A packed row gives each sequence what it gives alone (B = 1, T = its length): o, ht and every
// gradient, with h0 and dht rows.
TEST(KdaKernels, PackedSequencesEqualEachAlone) {
  const std::vector<int64_t> cu = {0, 7, 70, 71, 100};
  for (const Implementation& impl : implementations()) {
    const Problem p = problem(1, 100, 2, 4, 8, 8, 32, impl.impl, true, true, cu);
    const Data d = make_data(p, -2, 5);
    const Result packed = run_cpu<double>(p, d);
    for (size_t n = 0; n + 1 < cu.size(); ++n) {
      const int64_t t0 = cu[n], len = cu[n + 1] - cu[n];
      const Problem one = problem(1, len, 2, 4, 8, 8, 32, impl.impl, true, true);
      auto rows = [](const Vec& x, int64_t first, int64_t count, int64_t width) {
        return Vec(x.begin() + first * width, x.begin() + (first + count) * width);
      };
      const int64_t qk = p.H * p.K, vo = p.HV * p.V, gk = p.HV * p.K, st = p.HV * p.K * p.V;
      Data e;
      e.q = rows(d.q, t0, len, qk);
      e.k = rows(d.k, t0, len, qk);
      e.v = rows(d.v, t0, len, vo);
      e.g = rows(d.g, t0, len, gk);
      e.beta = rows(d.beta, t0, len, p.HV);
      e.d_o = rows(d.d_o, t0, len, vo);
      e.h0 = rows(d.h0, n, 1, st);
      e.dht = rows(d.dht, n, 1, st);
      const Result alone = run_cpu<double>(one, e);
      Result part;
      part.o = rows(packed.o, t0, len, vo);
      part.ht = rows(packed.ht, n, 1, st);
      part.dq = rows(packed.dq, t0, len, qk);
      part.dk = rows(packed.dk, t0, len, qk);
      part.dv = rows(packed.dv, t0, len, vo);
      part.dg = rows(packed.dg, t0, len, gk);
      part.dbeta = rows(packed.dbeta, t0, len, p.HV);
      part.dh0 = rows(packed.dh0, n, 1, st);
      expect_close(part, alone, 1e-13, std::string(impl.name) + " sequence " + std::to_string(n));
    }
  }
}

// Decays so strong that a state forgets within a step: g = -5 on every channel of every step
// (exp(5 C) overflows fp32 for C >= 18: any form with exp(-G) fails), held to 2e-6 (the fp32
// recurrent kernel's own error is 2e-7), and uniform in [-40, 0], held to 5e-5.
TEST(KdaKernels, StrongDecaysStayFinite) {
  for (const Implementation& impl : implementations())
    for (double g_min : {-5.0, -40.0}) {
      const Problem p = problem(1, 130, 1, 2, 16, 8, 64, impl.impl, true, true);
      Data d = make_data(p, g_min, 3);
      if (g_min == -5.0) std::fill(d.g.begin(), d.g.end(), -5.0);
      const Result ref = run_cpu<double>(with_impl(p, Impl::recurrent), d);
      expect_close(run_cpu<float>(p, d), ref, g_min == -5.0 ? 2e-6 : 5e-5,
                   std::string(impl.name) + " fp32 g_min " + std::to_string(g_min));
    }
}

// The op: autograd's fp64 finite differences of o and ht through kimi_delta_rule, every input.
TEST(KdaOp, GradcheckEveryInput) {
  for (const Implementation& impl : implementations())
    for (bool packed : {false, true}) {
      const int64_t B = packed ? 1 : 2, T = packed ? 23 : 13, N = packed ? 3 : 2;
      auto in = [](Shape s, double scale) {
        Tensor t = ops::mul(ops::randn(s, DType::float64), scale);
        t.set_requires_grad(true);
        return t;
      };
      const std::vector<Tensor> x = {in({B, T, 1, 4}, 1), in({B, T, 1, 4}, 1),
                                     in({B, T, 2, 3}, 1), in({B, T, 2, 4}, 1),
                                     in({B, T, 2}, 1),    in({N, 2, 4, 3}, 0.5)};
      ops::KdaOptions opt;
      opt.impl = impl.impl;
      opt.chunk_size = 16;
      opt.output_final_state = true;
      if (packed) opt.cu_seqlens = {0, 7, 16, 23};
      auto f = [opt](const std::vector<Tensor>& t) {
        const Tensor g = ops::mul(ops::softplus(t[3]), -1.0);
        const ops::KdaOutput r = ops::kimi_delta_rule(t[0], ops::l2_norm(t[1], 1e-6), t[2], g,
                                                      ops::sigmoid(t[4]), opt, t[5]);
        EXPECT_EQ(r.o.shape(), Shape({t[2].size(0), t[2].size(1), 2, 3}));
        return ops::concat({ops::reshape(r.o, {-1}), ops::reshape(r.ht, {-1})}, 0);
      };
      const auto report = autograd::gradcheck(std::string("kimi_delta_rule ") + impl.name, f, x,
                                              {"q", "k", "v", "g", "beta", "h0"});
      EXPECT_TRUE(report.ok()) << autograd::format_report({report});
    }
}

// On meta only shapes: o [B, T, HV, V] in the inputs' dtype, ht [N, HV, K, V] in fp32.
TEST(KdaOp, MetaShapes) {
  const Device meta = Device::meta();
  const DType bf = DType::bfloat16;
  ops::KdaOptions opt;
  opt.output_final_state = true;
  opt.cu_seqlens = {0, 100, 4096};
  const auto r = ops::kimi_delta_rule(
      ops::empty({1, 4096, 2, 128}, bf, meta), ops::empty({1, 4096, 2, 128}, bf, meta),
      ops::empty({1, 4096, 4, 64}, bf, meta), ops::empty({1, 4096, 4, 128}, bf, meta),
      ops::empty({1, 4096, 4}, bf, meta), opt);
  EXPECT_EQ(r.o.shape(), Shape({1, 4096, 4, 64}));
  EXPECT_EQ(r.o.dtype(), bf);
  EXPECT_EQ(r.ht.shape(), Shape({2, 4, 128, 64}));
  EXPECT_EQ(r.ht.dtype(), DType::float32);
}

// Errors name the shapes and what is wrong.
TEST(KdaOp, ErrorsNameShapes) {
  const DType f = DType::float32;
  const Tensor q = ops::zeros({1, 8, 2, 4}, f), v = ops::zeros({1, 8, 4, 3}, f),
               beta = ops::zeros({1, 8, 4}, f);
  // g per head (gated delta rule's shape) instead of per channel
  std::string e = test::error_of([&] {
    ops::kimi_delta_rule(q, q, v, ops::zeros({1, 8, 4}, f), beta);
  });
  EXPECT_NE(e.find("g [1, 8, 4]"), std::string::npos) << e;
  EXPECT_NE(e.find("g [B, T, HV, K]"), std::string::npos) << e;
  // HV not a multiple of H
  e = test::error_of([&] {
    ops::kimi_delta_rule(q, q, ops::zeros({1, 8, 3, 3}, f), ops::zeros({1, 8, 3, 4}, f),
                         ops::zeros({1, 8, 3}, f));
  });
  EXPECT_NE(e.find("HV (3) must be a multiple of H (2)"), std::string::npos) << e;
  ops::KdaOptions opt;
  opt.chunk_size = 48;
  e = test::error_of([&] {
    ops::kimi_delta_rule(q, q, v, ops::zeros({1, 8, 4, 4}, f), beta, opt);
  });
  EXPECT_NE(e.find("chunk size 48"), std::string::npos) << e;
  opt.chunk_size = 16;
  opt.cu_seqlens = {0, 5, 5, 8};
  e = test::error_of([&] {
    ops::kimi_delta_rule(q, q, v, ops::zeros({1, 8, 4, 4}, f), beta, opt);
  });
  EXPECT_NE(e.find("cu_seqlens[2] = 5 is not greater than cu_seqlens[1] = 5"), std::string::npos)
      << e;
  opt.cu_seqlens.clear();
  e = test::error_of([&] {
    ops::kimi_delta_rule(q, q, v, ops::zeros({1, 8, 4, 4}, f), beta, opt,
                         ops::zeros({2, 4, 4, 3}, f));
  });
  EXPECT_NE(e.find("h0 [2, 4, 4, 3] must be [B, HV, K, V] = [1, 4, 4, 3]"), std::string::npos) << e;
}

TEST(KdaRegistry, NamesAndLookups) {
  EXPECT_EQ(implementation_names(), "recurrent, chunked");
  EXPECT_EQ(find_implementation("chunked").impl, Impl::chunked);
  EXPECT_EQ(parse_impl("recurrent"), Impl::recurrent);
  try {
    find_implementation("fused");
    ADD_FAILURE() << "fused is not a kda implementation";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("known: recurrent, chunked"), std::string::npos);
  }
  Problem p = problem(2, 100, 1, 2, 8, 8, 32, Impl::chunked, false, false);
  EXPECT_EQ(residual_elems(p), 2 * 2 * 4 * 8 * 8);  // 4 chunks of 32 per row
  EXPECT_GT(forward_flops(p), 0);
  EXPECT_GT(backward_flops(p), forward_flops(p));
}

}  // namespace
}  // namespace gdn::kda
