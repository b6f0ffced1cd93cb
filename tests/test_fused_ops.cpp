// The fused layer ops (src/ops/fused.cpp, causal_conv1d_silu in src/ops/nn.cpp) against the
// unfused chains they replace: outputs and every input gradient under one upstream gradient, in
// fp32 (a few ulps: the same math, fewer roundings) and fp64, and in bf16 (one rounding apart);
// their shapes on the meta device. Finite differences: the op table's gradcheck rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "src/ops/ops.h"

namespace gdn {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Output then each input's gradient, with the upstream gradient drawn from `seed`.
std::vector<Tensor> run(const Fn& f, const std::vector<Tensor>& leaves, uint64_t seed) {
  std::vector<Tensor> in;
  for (const Tensor& t : leaves) in.push_back(ops::contiguous_copy(t).set_requires_grad(true));
  Tensor y = f(in);
  Generator gen(seed);
  Tensor dy = ops::cast(ops::randn(y.shape(), DType::float32, Device::cpu(), &gen), y.dtype());
  y.backward(dy);
  std::vector<Tensor> out{y.detach()};
  for (const Tensor& t : in) out.push_back(t.grad());
  return out;
}

// max|a - b| / max(max|b|, 1) over all elements.
double rel_diff(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector(), vb = b.to_vector();
  EXPECT_EQ(va.size(), vb.size());
  double diff = 0, scale = 1;
  for (size_t i = 0; i < va.size(); ++i) {
    diff = std::max(diff, std::fabs(va[i] - vb[i]));
    scale = std::max(scale, std::fabs(vb[i]));
  }
  return diff / scale;
}

// Fused and unfused at `dtype` on the same inputs (drawn in fp32, cast), within `tol`.
void expect_same(const Fn& fused, const Fn& unfused, const std::vector<Shape>& shapes, DType dtype,
                 double tol) {
  Generator gen(7);
  std::vector<Tensor> leaves;
  for (const Shape& s : shapes)
    leaves.push_back(ops::cast(ops::randn(s, DType::float32, Device::cpu(), &gen), dtype));
  const auto a = run(fused, leaves, 11), b = run(unfused, leaves, 11);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].defined() && b[i].defined()) << "result " << i;
    EXPECT_EQ(a[i].shape(), b[i].shape()) << "result " << i;
    EXPECT_LE(rel_diff(a[i], b[i]), tol)
        << (i ? "gradient of input " + std::to_string(i - 1) : std::string("output")) << " in "
        << dtype_name(dtype);
  }
}

// fp32: a few ulps (the fused kernels skip the intermediate roundings); fp64: ~1e-15; bf16:
// one rounding of 2^-8 on either side, amplified a little by the norms.
void expect_same_all(const Fn& fused, const Fn& unfused, const std::vector<Shape>& shapes) {
  expect_same(fused, unfused, shapes, DType::float32, 2e-6);
  expect_same(fused, unfused, shapes, DType::float64, 1e-13);
  expect_same(fused, unfused, shapes, DType::bfloat16, 3e-2);
}

TEST(FusedOps, ConvSiluMatchesConvThenSilu) {
  // channels past one accumulator block (64) and a partial one; W = 4 over T = 37
  expect_same_all([](auto& x) { return ops::causal_conv1d_silu(x[0], x[1]); },
                  [](auto& x) { return ops::silu(ops::causal_conv1d(x[0], x[1])); },
                  {{2, 37, 80}, {80, 1, 4}});
}

TEST(FusedOps, ConvSiluPackedMatchesConvThenSilu) {
  const std::vector<int64_t> cu = {0, 3, 4, 20, 29};
  expect_same_all([cu](auto& x) { return ops::causal_conv1d_silu(x[0], x[1], cu); },
                  [cu](auto& x) { return ops::silu(ops::causal_conv1d(x[0], x[1], cu)); },
                  {{1, 29, 24}, {24, 4}});
}

TEST(FusedOps, ConvSiluAcrossBackwardTilesMatchesConvThenSilu) {
  // The backward runs in tiles of 64 positions (kernels/cpu/conv_rows.h): 3 tiles a row, the last
  // partial; packed, with documents that start just before, at, and just after a tile's edge.
  expect_same_all([](auto& x) { return ops::causal_conv1d_silu(x[0], x[1]); },
                  [](auto& x) { return ops::silu(ops::causal_conv1d(x[0], x[1])); },
                  {{2, 150, 20}, {20, 1, 4}});
  const std::vector<int64_t> cu = {0, 62, 64, 129, 131, 200};
  expect_same_all([cu](auto& x) { return ops::causal_conv1d_silu(x[0], x[1], cu); },
                  [cu](auto& x) { return ops::silu(ops::causal_conv1d(x[0], x[1], cu)); },
                  {{1, 200, 24}, {24, 3}});
}

// l2_norm over heads of d channels of silu(conv(x)), as delta_rule_inputs ran it unfused.
Tensor conv_silu_then_l2norm(const Tensor& x, const Tensor& w, int64_t d,
                             const std::vector<int64_t>& cu = {}) {
  const Tensor y = ops::silu(ops::causal_conv1d(x, w, cu));
  const Shape heads = {x.size(0), x.size(1), x.size(2) / d, d};
  return ops::reshape(ops::l2_norm(ops::reshape(y, heads), 1e-6), x.shape());
}

TEST(FusedOps, ConvSiluL2NormMatchesConvSiluThenL2Norm) {
  // heads of 16 channels (and of 1: a norm of one channel), across backward tiles; packed
  expect_same_all([](auto& x) { return ops::causal_conv1d_silu_l2norm(x[0], x[1], 16, 1e-6); },
                  [](auto& x) { return conv_silu_then_l2norm(x[0], x[1], 16); },
                  {{2, 150, 48}, {48, 1, 4}});
  expect_same_all([](auto& x) { return ops::causal_conv1d_silu_l2norm(x[0], x[1], 1, 1e-6); },
                  [](auto& x) { return conv_silu_then_l2norm(x[0], x[1], 1); },
                  {{1, 9, 3}, {3, 1, 4}});
  const std::vector<int64_t> cu = {0, 62, 64, 129, 131, 200};
  expect_same_all([cu](auto& x) { return ops::causal_conv1d_silu_l2norm(x[0], x[1], 8, 1e-6, cu); },
                  [cu](auto& x) { return conv_silu_then_l2norm(x[0], x[1], 8, cu); },
                  {{1, 200, 24}, {24, 3}});
}

TEST(FusedOps, ConvSiluL2NormNamesAChannelCountThatIsNotHeads) {
  const Tensor x = ops::zeros({1, 4, 10}, DType::float32),
               w = ops::zeros({10, 1, 4}, DType::float32);
  try {
    ops::causal_conv1d_silu_l2norm(x, w, 4, 1e-6);
    FAIL() << "10 channels do not split into heads of 4";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("[1, 4, 10]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("heads of 4"), std::string::npos) << e.what();
  }
}

TEST(FusedOps, SwigluMatchesSiluTimesUp) {
  expect_same_all([](auto& x) { return ops::swiglu(x[0], x[1]); },
                  [](auto& x) { return ops::mul(ops::silu(x[0]), x[1]); },
                  {{4, 9, 70}, {4, 9, 70}});
}

TEST(FusedOps, GatedRmsNormMatchesNormTimesGate) {
  for (bool sig : {false, true}) {
    SCOPED_TRACE(sig ? "sigmoid gate" : "silu gate");
    expect_same_all([sig](auto& x) { return ops::gated_rms_norm(x[0], x[1], x[2], 1e-6, sig); },
                    [sig](auto& x) {
                      return ops::mul(ops::rms_norm(x[0], x[1], 1e-6),
                                      sig ? ops::sigmoid(x[2]) : ops::silu(x[2]));
                    },
                    {{3, 5, 64}, {64}, {3, 5, 64}});
  }
}

TEST(FusedOps, AddRmsNormMatchesAddThenNorm) {
  // Both outputs used, as in a block: h feeds the next residual, the norm the MLP.
  auto combine = [](const Tensor& h, const Tensor& y) {
    return ops::add(ops::mul(h, 0.5), ops::square(y));
  };
  expect_same_all(
      [combine](auto& x) {
        auto [h, y] = ops::add_rms_norm(x[0], x[1], x[2], 1e-5);
        return combine(h, y);
      },
      [combine](auto& x) {
        Tensor h = ops::add(x[0], x[1]);
        return combine(h, ops::rms_norm(h, x[2], 1e-5));
      },
      {{2, 7, 48}, {2, 7, 48}, {48}});
  // Only the normed output reaching the loss: h gets no gradient of its own.
  expect_same_all([](auto& x) { return ops::add_rms_norm(x[0], x[1], x[2], 1e-5).second; },
                  [](auto& x) { return ops::rms_norm(ops::add(x[0], x[1]), x[2], 1e-5); },
                  {{5, 32}, {5, 32}, {32}});
}

TEST(FusedOps, ShapesOnMeta) {
  const Device m = Device::meta();
  const Tensor x = ops::empty({2, 6, 8}, DType::float32, m),
               w = ops::empty({8, 1, 4}, DType::float32, m);
  EXPECT_EQ(ops::causal_conv1d_silu(x, w).shape(), x.shape());
  EXPECT_EQ(ops::causal_conv1d_silu_l2norm(x, w, 4, 1e-6).shape(), x.shape());
  EXPECT_EQ(ops::causal_conv1d_silu(ops::empty({1, 6, 8}, DType::bfloat16, m),
                                    ops::empty({8, 4}, DType::bfloat16, m), {0, 2, 6})
                .shape(),
            (Shape{1, 6, 8}));
  EXPECT_EQ(ops::swiglu(x, x).shape(), x.shape());
  const Tensor nw = ops::empty({8}, DType::float32, m);
  EXPECT_EQ(ops::gated_rms_norm(x, nw, x, 1e-6, true).shape(), x.shape());
  auto [h, y] = ops::add_rms_norm(x, x, nw, 1e-6);
  EXPECT_EQ(h.shape(), x.shape());
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_TRUE(y.device().is_meta());
}

TEST(FusedOps, RejectMismatchedShapes) {
  const Tensor a = ops::zeros({2, 3}), b = ops::zeros({3, 2}), w = ops::ones({3});
  EXPECT_THROW(ops::swiglu(a, b), Error);
  EXPECT_THROW(ops::gated_rms_norm(a, w, b, 1e-6, false), Error);
  EXPECT_THROW(ops::add_rms_norm(a, b, w, 1e-6), Error);
  EXPECT_THROW(ops::add_rms_norm(a, a, ops::ones({2}), 1e-6), Error);
}

}  // namespace
}  // namespace gdn
