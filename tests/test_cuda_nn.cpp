// CUDA against CPU for the ops whose kernels are kernels/cuda/{reduce,nn,gemm}: reductions (both
// kernel shapes, permuted dims, max with ties and its gradient), matmul in every transpose
// layout with broadcast batches and degenerate sizes, linear, softmax / log-softmax,
// cross-entropy (ignore index, int32/int64 targets, bad targets reported), embedding (repeated
// and many tokens, bad indices reported), RMSNorm (with and without weight, many rows),
// L2 norm, causal depthwise conv1d, and one small model-like graph. Each check builds the same
// graph on both devices, backpropagates the same upstream gradient, and compares the output and
// every input gradient at the dtype's tolerance; the CUDA run is repeated and must give the same
// bits. Label `gpu`; exits 77 without a device.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "src/ops/ops.h"
#include "tests/test_util.h"

GDN_TEST_REQUIRES_CUDA();

namespace gdn {
namespace {

const Device kCuda = Device::cuda(0);
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using Vecs = std::vector<std::vector<double>>;

// CPU and CUDA compute the same expression in another summation order: fp64 to ~1e-12, fp32
// to ~1e-6 of the largest value (1e-4 leaves room for long sums); bf16 and fp16 outputs round to
// 8 / 11 bits, so one ulp of the largest value.
double tol_for(DType d) {
  switch (d) {
    case DType::float64:
      return 1e-10;
    case DType::float32:
      return 1e-4;
    default:
      return 2e-2;
  }
}

Tensor random(const Shape& s, DType dt, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return ops::cast(ops::mul(ops::randn(s, DType::float32, Device::cpu(), &g), scale), dt);
}

// Runs f on copies of `inputs` on `dev` (floating inputs require grad), backpropagates a fixed
// random upstream gradient; returns the output, then each floating input's gradient.
Vecs run(const Fn& f, const std::vector<Tensor>& inputs, Device dev) {
  std::vector<Tensor> in;
  for (const Tensor& t : inputs) {
    Tensor x = ops::to_device(t, dev).detach();
    if (is_floating(x.dtype())) x.set_requires_grad(true);
    in.push_back(x);
  }
  Tensor y = f(in);
  Vecs out{y.to_vector()};
  Generator g(99);
  Tensor dy = ops::cast(ops::randn(y.shape(), DType::float32, Device::cpu(), &g), y.dtype());
  y.backward(ops::to_device(dy, dev));
  for (const Tensor& x : in)
    if (x.requires_grad())
      out.push_back(x.grad().defined() ? x.grad().to_vector() : Vecs::value_type());
  return out;
}

// `exact`: the kernels promise the CPU's bits (same order and rounding).
void check(const std::string& what, const Fn& f, const std::vector<Tensor>& inputs, double tol,
           bool exact = false) {
  SCOPED_TRACE(what);
  const Vecs cpu = run(f, inputs, Device::cpu());
  const Vecs gpu = run(f, inputs, kCuda);
  const Vecs again = run(f, inputs, kCuda);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    const char* name = i == 0 ? "output" : "grad of input";
    ASSERT_EQ(gpu[i].size(), cpu[i].size()) << name << " " << i;
    if (exact)
      EXPECT_EQ(gpu[i], cpu[i]) << name << " " << i;
    else
      EXPECT_LE(test::rel_err(gpu[i], cpu[i]), tol) << name << " " << i;
    EXPECT_EQ(again[i], gpu[i]) << name << " " << i << ": not bitwise reproducible";
  }
}

const DType kDtypes[] = {DType::float32, DType::bfloat16};

TEST(CudaNn, Reductions) {
  for (DType dt : kDtypes) {
    const double tol = tol_for(dt);
    const std::string n = dtype_name(dt);
    Tensor a = random({3, 37, 5}, dt, 1), b = random({4, 6, 40}, dt, 2),
           c = random({2, 5000}, dt, 3);
    check(
        "sum inner<32 " + n, [](auto& x) { return ops::sum(x[0], {1}); }, {a}, tol);
    check(
        "sum inner>=32 " + n, [](auto& x) { return ops::sum(x[0], {1}); }, {b}, tol);
    check(
        "sum permuted " + n,
        [](auto& x) {
          return ops::sum(x[0], {0, 2}, true);
        },
        {a}, tol);
    check(
        "sum all " + n, [](auto& x) { return ops::sum(x[0]); }, {c}, tol);
    check(
        "sum long rows " + n, [](auto& x) { return ops::sum(x[0], {-1}); }, {c}, tol);
    check(
        "mean " + n, [](auto& x) { return ops::mean(x[0], {0}); }, {b}, tol);
    for (int64_t d : {0, 1, 2})
      check(
          "max dim " + std::to_string(d) + " " + n, [d](auto& x) { return ops::max(x[0], d); }, {b},
          tol);
    // Ties (small integers): the first maximum wins on both devices, bit for bit.
    Tensor ties = ops::cast(ops::randint({5, 64, 33}, -3, 3, DType::int64, Device::cpu()), dt);
    for (int64_t d : {1, 2})
      check(
          "max ties " + n, [d](auto& x) { return ops::max(x[0], d, true); }, {ties}, 0, true);
  }
}

TEST(CudaNn, MatmulLayoutsAndDtypes) {
  for (DType dt : {DType::float32, DType::float64, DType::bfloat16, DType::float16}) {
    const double tol = tol_for(dt);
    const std::string n = dtype_name(dt);
    Tensor a = random({5, 7}, dt, 4), b = random({7, 3}, dt, 5);
    check(
        "mm " + n, [](auto& x) { return ops::matmul(x[0], x[1]); }, {a, b}, tol);
    // Transposed views go to cuBLAS as they are: every combination of op(A), op(B).
    Tensor at = random({7, 5}, dt, 6), bt = random({3, 7}, dt, 7);
    auto T = [](const Tensor& x) { return ops::transpose(x, -1, -2); };
    check(
        "mm A^T " + n, [T](auto& x) { return ops::matmul(T(x[0]), x[1]); }, {at, b}, tol);
    check(
        "mm B^T " + n, [T](auto& x) { return ops::matmul(x[0], T(x[1])); }, {a, bt}, tol);
    check(
        "mm A^T B^T " + n, [T](auto& x) { return ops::matmul(T(x[0]), T(x[1])); }, {at, bt}, tol);
    // Broadcast batch dims (stride 0 for one operand) and batched transposes.
    Tensor ba = random({2, 1, 5, 7}, dt, 8), bb = random({3, 7, 4}, dt, 9);
    check(
        "bmm broadcast " + n, [](auto& x) { return ops::matmul(x[0], x[1]); }, {ba, bb}, tol);
    check(
        "bmm A^T " + n, [T](auto& x) { return ops::matmul(T(x[0]), x[1]); },
        {random({3, 7, 5}, dt, 10), bb}, tol);
    // Vectors and a single element.
    check(
        "mm M=1 " + n, [](auto& x) { return ops::matmul(x[0], x[1]); }, {random({1, 7}, dt, 11), b},
        tol);
    check(
        "mm N=1 " + n, [](auto& x) { return ops::matmul(x[0], x[1]); }, {a, random({7, 1}, dt, 12)},
        tol);
    check(
        "mm K=1 " + n, [](auto& x) { return ops::matmul(x[0], x[1]); },
        {random({6, 1}, dt, 13), random({1, 4}, dt, 14)}, tol);
    check(
        "linear " + n, [](auto& x) { return ops::linear(x[0], x[1], x[2]); },
        {random({2, 3, 7}, dt, 15), random({5, 7}, dt, 16), random({5}, dt, 17)}, tol);
  }
  // K = 0: the product of empty matrices is zeros (cuBLAS is not called).
  Tensor e = ops::matmul(ops::empty({3, 0}, DType::float32, kCuda),
                         ops::empty({0, 4}, DType::float32, kCuda));
  test::expect_values(e, std::vector<double>(12, 0.0), 0);
}

TEST(CudaNn, SoftmaxAndCrossEntropy) {
  for (DType dt : kDtypes) {
    const double tol = tol_for(dt);
    const std::string n = dtype_name(dt);
    Tensor x = random({3, 1000}, dt, 20, 3.0), y = random({7, 5}, dt, 21);
    check(
        "softmax " + n, [](auto& t) { return ops::softmax(t[0], -1); }, {x}, tol);
    check(
        "log_softmax " + n, [](auto& t) { return ops::log_softmax(t[0], -1); }, {x}, tol);
    check(
        "softmax dim0 " + n, [](auto& t) { return ops::softmax(t[0], 0); }, {y}, tol);
    check(
        "log_softmax dim0 " + n, [](auto& t) { return ops::log_softmax(t[0], 0); }, {y}, tol);
    Tensor logits = random({37, 101}, dt, 22, 2.0);
    std::vector<double> tv;
    for (int i = 0; i < 37; ++i) tv.push_back(i % 5 == 0 ? -100 : (i * 13) % 101);
    for (DType it : {DType::int64, DType::int32}) {
      Tensor t = ops::from_vector(tv, {37}, it);
      check(
          "cross_entropy " + n, [](auto& z) { return ops::cross_entropy(z[0], z[1]); }, {logits, t},
          tol);
    }
    Tensor all_ignored = ops::full({37}, -100, DType::int64);
    check(
        "cross_entropy all ignored " + n, [](auto& z) { return ops::cross_entropy(z[0], z[1]); },
        {logits, all_ignored}, tol);
    // A target outside the vocabulary is reported with its row, as on the CPU.
    std::vector<double> bad = tv;
    bad[11] = 101;
    Tensor lc = ops::to_device(logits, kCuda);
    EXPECT_THROW(ops::cross_entropy(lc, ops::from_vector(bad, {37}, DType::int64, kCuda)), Error);
    bad[11] = -3;
    EXPECT_THROW(ops::cross_entropy(lc, ops::from_vector(bad, {37}, DType::int32, kCuda)), Error);
  }
}

TEST(CudaNn, Embedding) {
  for (DType dt : kDtypes) {
    const std::string n = dtype_name(dt);
    // Repeated indices: dweight rows summed in token order, the CPU's order and rounding.
    Tensor w = random({50, 33}, dt, 30);
    for (DType it : {DType::int64, DType::int32}) {
      Tensor idx = ops::randint({4, 9}, 0, 10, it, Device::cpu());
      check(
          "embedding " + n, [](auto& z) { return ops::embedding(z[0], z[1]); }, {w, idx}, 0, true);
    }
    // Many tokens (several token tiles) and a vocabulary of several blocks.
    Tensor big = random({5000, 64}, dt, 31);
    Tensor many = ops::randint({3, 1100}, 0, 5000, DType::int64, Device::cpu());
    check(
        "embedding many " + n, [](auto& z) { return ops::embedding(z[0], z[1]); }, {big, many}, 0,
        true);
    Tensor wc = ops::to_device(w, kCuda);
    EXPECT_THROW(ops::embedding(wc, ops::from_vector({1, 50}, {2}, DType::int64, kCuda)), Error);
    EXPECT_THROW(ops::embedding(wc, ops::from_vector({-1}, {1}, DType::int32, kCuda)), Error);
  }
}

TEST(CudaNn, Norms) {
  for (DType dt : kDtypes) {
    const double tol = tol_for(dt);
    const std::string n = dtype_name(dt);
    Tensor x = random({6, 5, 48}, dt, 40), w = random({48}, dt, 41);
    check(
        "rms_norm " + n, [](auto& z) { return ops::rms_norm(z[0], z[1], 1e-6); }, {x, w}, tol);
    check(
        "rms_norm no weight " + n, [](auto& z) { return ops::rms_norm(z[0], Tensor(), 1e-6); }, {x},
        tol);
    // Many rows: dw sums over many parts of the two-pass split.
    Tensor xs = random({10000, 64}, dt, 42), ws = random({64}, dt, 43);
    check(
        "rms_norm many rows " + n, [](auto& z) { return ops::rms_norm(z[0], z[1], 1e-5); },
        {xs, ws}, tol);
    check(
        "rms_norm wide " + n, [](auto& z) { return ops::rms_norm(z[0], z[1], 1e-5); },
        {random({3, 1000}, dt, 44), random({1000}, dt, 45)}, tol);
    check(
        "l2_norm " + n, [](auto& z) { return ops::l2_norm(z[0]); }, {random({7, 33}, dt, 46)}, tol);
    check(
        "l2_norm 3d " + n, [](auto& z) { return ops::l2_norm(z[0], 1e-6); },
        {random({2, 3, 64}, dt, 47)}, tol);
  }
}

TEST(CudaNn, CausalConv1d) {
  for (DType dt : kDtypes) {
    const double tol = tol_for(dt);
    const std::string n = dtype_name(dt);
    check(
        "conv " + n, [](auto& z) { return ops::causal_conv1d(z[0], z[1]); },
        {random({2, 37, 24}, dt, 50), random({24, 4}, dt, 51)}, tol);
    check(
        "conv [C,1,W] " + n, [](auto& z) { return ops::causal_conv1d(z[0], z[1]); },
        {random({1, 5, 3}, dt, 52), random({3, 1, 4}, dt, 53)}, tol);  // T < W
    check(
        "conv long " + n, [](auto& z) { return ops::causal_conv1d(z[0], z[1]); },
        {random({3, 500, 40}, dt, 54), random({40, 3}, dt, 55)}, tol);
  }
}

// A small model-like graph on both devices: embedding -> conv -> silu -> L2 norm -> linear ->
// RMSNorm -> cross-entropy. In bf16 each of the six ops rounds its output (<= 2^-8 relative) and
// the two devices may round a value differently, so the bound is the chain's: six roundings,
// doubled for the amplification of the norms, 6 * 2 * 2^-8 ~ 5e-2.
TEST(CudaNn, SmallGraph) {
  for (DType dt : kDtypes) {
    const double tol = dt == DType::bfloat16 ? 5e-2 : tol_for(dt);
    Tensor emb = random({40, 16}, dt, 60), conv = random({16, 4}, dt, 61, 0.5);
    Tensor proj = random({40, 16}, dt, 62, 0.3), norm = random({40}, dt, 63);
    Tensor tokens = ops::randint({2, 23}, 0, 40, DType::int64, Device::cpu());
    Tensor targets = ops::randint({46}, 0, 40, DType::int64, Device::cpu());
    check(
        std::string("graph ") + dtype_name(dt),
        [](auto& z) {
          Tensor h = ops::embedding(z[0], z[4]);
          h = ops::l2_norm(ops::silu(ops::causal_conv1d(h, z[1])));
          Tensor logits = ops::rms_norm(ops::linear(h, z[2]), z[3], 1e-6);
          return ops::cross_entropy(ops::reshape(logits, {46, 40}), z[5]);
        },
        {emb, conv, proj, norm, tokens, targets}, tol);
  }
}

}  // namespace
}  // namespace gdn
