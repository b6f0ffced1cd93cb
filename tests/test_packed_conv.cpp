// The causal conv over packed sequences (ops::causal_conv1d with cu_seqlens): outputs and the
// gradients of x and w equal running each sequence alone (fp64, 1e-10), with sequences shorter
// than the kernel width and of length 1; fp64 finite differences through cu_seqlens; malformed
// cu_seqlens named with the entry; the ShortConv layer passes cu_seqlens on.
#include <gtest/gtest.h>

#include <vector>

#include "layers/short_conv.h"
#include "src/autograd/gradcheck.h"
#include "src/ops/ops.h"
#include "tests/test_helpers.h"
#include "tests/test_util.h"

namespace gdn {
namespace {

constexpr int64_t kC = 5, kW = 4;
// Lengths 2, 1, 7, 3 and 4: three shorter than the kernel width.
const std::vector<int64_t> kCu = {0, 2, 3, 10, 13, 17};

struct Grads {
  Tensor y, dx, dw;
};

// y = conv(x, w) over [cu[n], cu[n+1]) of each n alone (cu empty: the whole row), and the
// gradients of L = sum(y * r).
Grads run(const Tensor& x0, const Tensor& w0, const Tensor& r, const std::vector<int64_t>& cu,
          bool per_sequence) {
  Tensor x = x0.detach().set_requires_grad(true), w = w0.detach().set_requires_grad(true);
  Tensor y;
  if (per_sequence) {
    std::vector<Tensor> parts;
    for (size_t n = 0; n + 1 < cu.size(); ++n)
      parts.push_back(ops::causal_conv1d(ops::slice(x, 1, cu[n], cu[n + 1]), w));
    y = ops::concat(parts, 1);
  } else {
    y = ops::causal_conv1d(x, w, cu);
  }
  ops::sum(ops::mul(y, r)).backward();
  return {y.detach(), x.grad(), w.grad()};
}

TEST(PackedConv, EqualsEachSequenceAlone) {
  const int64_t T = kCu.back();
  const Tensor x = ops::randn({1, T, kC}, DType::float64);
  const Tensor w = ops::randn({kC, 1, kW}, DType::float64);
  const Tensor r = ops::randn({1, T, kC}, DType::float64);
  const Grads packed = run(x, w, r, kCu, false), alone = run(x, w, r, kCu, true);
  EXPECT_LT(test::rel_err(packed.y, alone.y), 1e-10);
  EXPECT_LT(test::rel_err(packed.dx, alone.dx), 1e-10);
  EXPECT_LT(test::rel_err(packed.dw, alone.dw), 1e-10);
  // Without cu_seqlens the taps cross the boundaries: the comparison above can fail.
  const Grads stream = run(x, w, r, {}, false);
  EXPECT_GT(test::rel_err(stream.y, alone.y), 1e-3);
  EXPECT_GT(test::rel_err(stream.dx, alone.dx), 1e-3);
  EXPECT_GT(test::rel_err(stream.dw, alone.dw), 1e-3);
}

// One sequence is the unpacked conv, bit for bit.
TEST(PackedConv, OneSequenceIsTheUnpackedConv) {
  const Tensor x = ops::randn({1, 9, kC}, DType::float64);
  const Tensor w = ops::randn({kC, kW}, DType::float64);
  const Tensor r = ops::randn({1, 9, kC}, DType::float64);
  const Grads packed = run(x, w, r, {0, 9}, false), plain = run(x, w, r, {}, false);
  EXPECT_EQ(packed.y.to_vector(), plain.y.to_vector());
  EXPECT_EQ(packed.dx.to_vector(), plain.dx.to_vector());
  EXPECT_EQ(packed.dw.to_vector(), plain.dw.to_vector());
}

TEST(PackedConv, FiniteDifferencesThroughCuSeqlens) {
  const int64_t T = kCu.back();
  Tensor x = ops::randn({1, T, kC}, DType::float64).set_requires_grad(true);
  Tensor w = ops::randn({kC, kW}, DType::float64).set_requires_grad(true);
  const auto report = autograd::gradcheck(
      "causal_conv1d packed",
      [](const std::vector<Tensor>& in) { return ops::causal_conv1d(in[0], in[1], kCu); }, {x, w},
      {"x", "w"});
  EXPECT_TRUE(report.ok());
}

TEST(PackedConv, MalformedCuSeqlensNameTheEntry) {
  const Tensor x = ops::randn({1, 6, kC}, DType::float64);
  const Tensor w = ops::randn({kC, kW}, DType::float64);
  const auto err = [&](const std::vector<int64_t>& cu, const Tensor& in) {
    return test::error_of([&] { ops::causal_conv1d(in, w, cu); });
  };
  EXPECT_NE(err({1, 6}, x).find("cu_seqlens[0] = 1"), std::string::npos) << err({1, 6}, x);
  EXPECT_NE(err({0, 4, 4, 6}, x).find("cu_seqlens[2] = 4"), std::string::npos);
  EXPECT_NE(err({0, 5}, x).find("cu_seqlens[1] = 5"), std::string::npos);
  const Tensor two_rows = ops::randn({2, 3, kC}, DType::float64);
  EXPECT_NE(err({0, 3}, two_rows).find("B must be 1"), std::string::npos);
}

// The layer (conv then SiLU) restarts too: its output on the packed row equals the sequences'.
TEST(PackedConv, ShortConvLayerTakesCuSeqlens) {
  Generator g(3);
  nn::InitContext ctx;
  ctx.dtype = DType::float64;
  ctx.gen = &g;
  ctx.std = 0.5;
  nn::ShortConv conv(kC, kW, ctx);
  const Tensor x = ops::randn({1, kCu.back(), kC}, DType::float64);
  std::vector<Tensor> parts;
  for (size_t n = 0; n + 1 < kCu.size(); ++n)
    parts.push_back(conv.forward(ops::slice(x, 1, kCu[n], kCu[n + 1])));
  EXPECT_LT(test::rel_err(conv.forward(x, kCu), ops::concat(parts, 1)), 1e-12);
}

}  // namespace
}  // namespace gdn
