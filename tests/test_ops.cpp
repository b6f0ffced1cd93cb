// Forward values of every op, derived by hand or from identities; broadcasting; casts;
// the custom Function API; autograd accumulation and no-grad.
#include <gtest/gtest.h>

#include <cmath>

#include "src/autograd/function.h"
#include "src/ops/ops.h"
#include "tests/test_util.h"

namespace gdn {
namespace {

using ops::from_vector;
using test::expect_values;

TEST(Elementwise, BroadcastArithmetic) {
  Tensor a = from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector({10, 20, 30}, {3});
  Tensor c = from_vector({100, 200}, {2, 1});
  expect_values(a + b, {11, 22, 33, 14, 25, 36});
  expect_values(a - c, {-99, -98, -97, -196, -195, -194});
  expect_values(a * c, {100, 200, 300, 800, 1000, 1200});
  expect_values(b / from_vector({2}, {1}), {5, 10, 15});
  expect_values(ops::add(a, 0.5), {1.5, 2.5, 3.5, 4.5, 5.5, 6.5});
  expect_values(ops::rsub(b, 1.0), {-9, -19, -29});
  expect_values(2.0 * b - 1.0, {19, 39, 59});
  // Broadcasting a transposed (strided) operand.
  Tensor t = ops::transpose(from_vector({1, 2, 3, 4}, {2, 2}), 0, 1);  // [[1,3],[2,4]]
  expect_values(t + from_vector({0, 10}, {2}), {1, 13, 2, 14});
  EXPECT_THROW(a + from_vector({1, 2}, {2}), Error);
}

TEST(Elementwise, UnaryValues) {
  Tensor x = from_vector({-2, -0.5, 0, 0.5, 3}, {5});
  auto v = x.to_vector();
  auto each = [&](auto f) {
    std::vector<double> out;
    for (double e : v) out.push_back(f(e));
    return out;
  };
  expect_values(ops::exp(x), each([](double e) { return std::exp(e); }));
  expect_values(ops::sigmoid(x), each([](double e) { return 1 / (1 + std::exp(-e)); }));
  expect_values(ops::silu(x), each([](double e) { return e / (1 + std::exp(-e)); }));
  expect_values(ops::softplus(x), each([](double e) { return std::log1p(std::exp(e)); }));
  expect_values(ops::tanh(x), each([](double e) { return std::tanh(e); }));
  expect_values(ops::abs(x), {2, 0.5, 0, 0.5, 3});
  expect_values(ops::square(x), {4, 0.25, 0, 0.25, 9});
  expect_values(ops::neg(x), {2, 0.5, 0, -0.5, -3});
  Tensor p = from_vector({0.25, 1, 4}, {3});
  expect_values(ops::sqrt(p), {0.5, 1, 2});
  expect_values(ops::rsqrt(p), {2, 1, 0.5});
  expect_values(ops::log(p), {std::log(0.25), 0, std::log(4.0)});
  expect_values(ops::pow(p, 1.5), {0.125, 1, 8});
  // softplus is linear above 20 (no overflow) and tiny far below 0.
  expect_values(ops::softplus(from_vector({50, -50}, {2})), {50, std::exp(-50.0)}, 1e-6);
}

TEST(Reduce, SumMeanMax) {
  Tensor a = from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
  expect_values(ops::sum(a), {78});
  expect_values(ops::sum(a, {0}), {8, 10, 12, 14, 16, 18});
  expect_values(ops::sum(a, {1}), {9, 12, 27, 30});
  expect_values(ops::sum(a, {0, 2}), {18, 26, 34});
  EXPECT_EQ(ops::sum(a, {1}, true).shape(), (Shape{2, 1, 2}));
  expect_values(ops::mean(a, {-1}), {1.5, 3.5, 5.5, 7.5, 9.5, 11.5});
  Tensor m = from_vector({3, 9, 1, -1, -7, -2}, {2, 3});
  expect_values(ops::max(m, 1), {9, -1});
  expect_values(ops::max(m, 0), {3, 9, 1});
}

TEST(Linalg, MatmulAndLinear) {
  Tensor a = from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector({7, 8, 9, 10, 11, 12}, {3, 2});
  expect_values(ops::matmul(a, b), {58, 64, 139, 154});
  // (A B)^T = B^T A^T, through transposed views passed to BLAS without copies.
  expect_values(ops::matmul(ops::transpose(b, 0, 1), ops::transpose(a, 0, 1)), {58, 139, 64, 154});
  // Batched with broadcast batch dims.
  Tensor batch = ops::concat({ops::unsqueeze(a, 0), ops::unsqueeze(ops::mul(a, 2.0), 0)}, 0);
  expect_values(ops::matmul(batch, b), {58, 64, 139, 154, 116, 128, 278, 308});
  // linear(x, W, b) = x W^T + b
  Tensor w = from_vector({1, 0, -1, 2, 1, 0}, {2, 3});
  expect_values(ops::linear(a, w, from_vector({0.5, -0.5}, {2})), {-1.5, 3.5, -1.5, 12.5});
  // bf16 and float64 give the same small-integer products.
  expect_values(ops::matmul(ops::cast(a, DType::bfloat16), ops::cast(b, DType::bfloat16)),
                {58, 64, 139, 154});
  expect_values(ops::matmul(ops::cast(a, DType::float64), ops::cast(b, DType::float64)),
                {58, 64, 139, 154});
}

TEST(NN, SoftmaxAndCrossEntropy) {
  Tensor x = from_vector({1, 2, 3, 1, 1, 1}, {2, 3});
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), z = e1 + e2 + e3;
  expect_values(ops::softmax(x), {e1 / z, e2 / z, e3 / z, 1. / 3, 1. / 3, 1. / 3});
  expect_values(ops::log_softmax(x), {1 - std::log(z), 2 - std::log(z), 3 - std::log(z),
                                      -std::log(3.0), -std::log(3.0), -std::log(3.0)});
  // Rows sum to one along dim 0 too.
  expect_values(ops::sum(ops::softmax(x, 0), {0}), {1, 1, 1});
  Tensor t = from_vector({2, 0}, {2}, DType::int64);
  const double l0 = std::log(z) - 3, l1 = std::log(3.0);
  expect_values(ops::cross_entropy(x, t), {(l0 + l1) / 2});
  Tensor ti = from_vector({2, -100}, {2}, DType::int32);
  expect_values(ops::cross_entropy(x, ti, -100), {l0});
  EXPECT_THROW(ops::cross_entropy(x, from_vector({3, 0}, {2}, DType::int64)), Error);
  // Large logits do not overflow.
  expect_values(
      ops::cross_entropy(from_vector({1000, 0}, {1, 2}), from_vector({0}, {1}, DType::int64)), {0},
      1e-6);
}

TEST(NN, EmbeddingNormsConv) {
  Tensor w = from_vector({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor idx = from_vector({2, 0, 2}, {3}, DType::int64);
  expect_values(ops::embedding(w, idx), {20, 21, 0, 1, 20, 21});
  EXPECT_THROW(ops::embedding(w, from_vector({3}, {1}, DType::int64)), Error);

  Tensor x = from_vector({3, 4, 0, 0}, {2, 2});
  // rms of (3, 4) is sqrt(12.5); of (0, 0) is 0 -> output 0.
  const double r = 1 / std::sqrt(12.5 + 1e-6);
  expect_values(ops::rms_norm(x, from_vector({1, 2}, {2}), 1e-6), {3 * r, 8 * r, 0, 0});
  expect_values(ops::l2_norm(from_vector({3, 4}, {1, 2}), 0.0), {0.6, 0.8});

  // y[t] = w0 x[t-2] + w1 x[t-1] + w2 x[t]; one channel.
  Tensor xc = from_vector({1, 2, 3, 4}, {1, 4, 1});
  Tensor wc = from_vector({1, 10, 100}, {1, 1, 3});
  expect_values(ops::causal_conv1d(xc, wc), {100, 210, 321, 432});
}

TEST(Shape, ConcatSliceCast) {
  Tensor a = from_vector({1, 2, 3, 4}, {2, 2}), b = from_vector({5, 6}, {1, 2});
  expect_values(ops::concat({a, b}, 0), {1, 2, 3, 4, 5, 6});
  expect_values(ops::concat({a, ops::transpose(a, 0, 1)}, 1), {1, 2, 1, 3, 3, 4, 2, 4});
  expect_values(ops::slice(ops::concat({a, b}, 0), 0, 1, -1), {3, 4});
  EXPECT_EQ(ops::flatten(ops::zeros({2, 3, 4}), 1).shape(), (Shape{2, 12}));
  // Casts: bf16 rounds to nearest even; ints truncate toward zero.
  Tensor f = from_vector({1.0 + 1.0 / 256, 1.0 + 3.0 / 256, -2.7, 2.7}, {4});
  expect_values(ops::cast(f, DType::bfloat16), {1.0, 1.0 + 1.0 / 64, -2.703125, 2.703125}, 0);
  expect_values(ops::cast(f, DType::int32), {1, 1, -2, 2}, 0);
  expect_values(ops::cast(ops::cast(f, DType::float16), DType::float64),
                {1.0 + 1.0 / 256, 1.0 + 3.0 / 256, -2.69921875, 2.69921875}, 0);  // exact in fp16
}

TEST(Autograd, AccumulatesAndRespectsNoGrad) {
  Tensor x = from_vector({1, 2, 3}, {3}, DType::float64).set_requires_grad(true);
  // y = x*x + 3x uses x twice: dy/dx = 2x + 3.
  Tensor y = ops::sum(x * x + x * 3.0);
  y.backward();
  expect_values(x.grad(), {5, 7, 9});
  // A second backward adds to .grad.
  ops::sum(x).backward();
  expect_values(x.grad(), {6, 8, 10});
  {
    autograd::NoGradGuard ng;
    Tensor z = x * 2.0;
    EXPECT_FALSE(z.requires_grad());
  }
  Tensor z = x * 2.0;
  EXPECT_TRUE(z.requires_grad());
  EXPECT_FALSE(z.detach().requires_grad());
  // Backward twice through a released graph is an error, with retain_graph it works.
  Tensor w = ops::sum(ops::exp(x));
  w.backward(Tensor(), true);
  w.backward();
  EXPECT_THROW(w.backward(), Error);
}

// add's backward hands one gradient tensor to both of its inputs. When one of those slots (or a
// leaf's .grad) gets a second gradient before the other is consumed, the sum must not be written
// into the shared tensor: here a's slot gets d's gradient (shared with b's) and then c's.
TEST(Autograd, ASharedGradientIsNotSummedInPlace) {
  Tensor x = from_vector({1, 2, 3}, {3}, DType::float64).set_requires_grad(true);
  Tensor w = from_vector({1, 10, 100}, {3}, DType::float64);
  Tensor v = from_vector({2, 20, 200}, {3}, DType::float64);
  Tensor a = x * 2.0, b = x * 5.0;
  Tensor c = a * 3.0;  // backward after d: its gradient reaches a's slot last
  Tensor d = ops::add(a, b);
  // dL/dx = 2 (w + 3 v) + 5 w; contiguous gradients (mul by a tensor) so the engine may sum in
  // place.
  ops::sum(ops::add(ops::mul(d, w), ops::mul(c, v))).backward();
  expect_values(x.grad(), {2 * (1 + 3 * 2) + 5 * 1, 2 * (10 + 3 * 20) + 5 * 10,
                           2 * (100 + 3 * 200) + 5 * 100});

  // The same with a leaf: x's .grad must not adopt the tensor b's slot still holds, since x's
  // second gradient (through e) is added into its .grad in place.
  Tensor z = from_vector({1, 2, 3}, {3}, DType::float64).set_requires_grad(true);
  Tensor y = z * 5.0;
  Tensor e = z * 3.0;
  Tensor f = ops::add(z, y);  // dL/dz = w + 3 v + 5 w
  ops::sum(ops::add(ops::mul(f, w), ops::mul(e, v))).backward();
  expect_values(z.grad(), {1 + 3 * 2 + 5 * 1, 10 + 3 * 20 + 5 * 10, 100 + 3 * 200 + 5 * 100});
}

// A custom Function: y = x^3 with a hand-written backward 3 x^2 g.
struct Cube : autograd::Function {
  const char* name() const override { return "cube"; }
  std::vector<Tensor> forward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    ctx.save_for_backward({in[0]});
    return {in[0] * in[0] * in[0]};
  }
  std::vector<Tensor> backward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& g) override {
    const Tensor& x = ctx.saved()[0];
    return {g[0] * x * x * 3.0};
  }
};

TEST(Autograd, CustomFunction) {
  Tensor x = from_vector({1, -2, 0.5}, {3}, DType::float64).set_requires_grad(true);
  Tensor y = autograd::apply(std::make_shared<Cube>(), {x})[0];
  expect_values(y, {1, -8, 0.125});
  EXPECT_EQ(y.grad_fn()->op, "cube");
  EXPECT_EQ(y.grad_fn()->saved_bytes(), 24);
  ops::sum(y).backward();
  expect_values(x.grad(), {3, 12, 0.75});
}

TEST(Autograd, LongChainsDoNotOverflowTheStack) {
  Tensor x = ops::ones({1}, DType::float64).set_requires_grad(true);
  Tensor y = x;
  for (int i = 0; i < 50000; ++i) y = ops::add(y, 1e-6);
  ops::sum(y).backward();
  expect_values(x.grad(), {1});
}

}  // namespace
}  // namespace gdn
