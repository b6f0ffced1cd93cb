// CUDA against CPU for the ops whose kernels are kernels/cuda/{reduce,nn,gemm}: reductions (both
// kernel shapes, permuted dims, max with ties and its gradient), matmul in every transpose
// layout with broadcast batches and degenerate sizes, linear, softmax / log-softmax,
// cross-entropy (ignore index, int32/int64 targets, bad targets reported), embedding (repeated
// and many tokens, bad indices reported), RMSNorm (with and without weight, many rows),
// L2 norm, causal depthwise conv1d, and one small model-like graph. Each check builds the same
// graph on both devices, backpropagates the same upstream gradient, and compares the output and
// every input gradient at the dtype's tolerance; the CUDA run is repeated and must give the same
// bits. The cuDNN conv (kernels/cuda/conv_cudnn.h) also on the kernel API: y, dx, dw (together
// and alone) against the CPU kernel in fp64 and against the direct kernel on odd shapes (t = 1,
// t < k, c not a multiple of 8, k = 1..4), bitwise reruns, empty batches; and through the op with
// GDN_CONV1D=cudnn, whose bad values are errors. Label `gpu`; exits 77 without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/ops/ops.h"
#include "tests/test_util.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cpu/nn.h"
#include "kernels/cuda/conv_cudnn.h"
#include "kernels/cuda/nn.h"
#include "src/core/cuda/cuda_context.h"
#endif

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

#if defined(GDN_WITH_CUDA)
// Sets an environment variable for a scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

struct ConvShape {
  int64_t b, t, c, k;
};
std::string conv_label(const ConvShape& s, DType dt) {
  return "b=" + std::to_string(s.b) + " t=" + std::to_string(s.t) + " c=" + std::to_string(s.c) +
         " k=" + std::to_string(s.k) + " " + dtype_name(dt);
}

// Outputs of one implementation: y, then dx and dw of one backward, then dx alone and dw alone.
struct ConvOut {
  std::vector<double> y, dx, dw, dx_alone, dw_alone;
};

Tensor device_bytes(size_t bytes) {
  return ops::empty({int64_t(std::max<size_t>((bytes + 3) / 4, 1))}, DType::float32, kCuda);
}

// Runs the cuDNN or the direct conv on the kernel API; x, w, dy are CUDA tensors of type T.
template <typename T>
ConvOut run_conv_kernels(bool cudnn, const ConvShape& s, const Tensor& x, const Tensor& w,
                         const Tensor& dy) {
  void* stream = cuda::current_stream(0);
  const DType dt = x.dtype();
  const int64_t n = s.b * s.t * s.c;
  Tensor y = ops::empty({n}, dt, kCuda), dx = ops::empty({n}, dt, kCuda);
  Tensor dw = ops::empty({s.c * s.k}, dt, kCuda), dx1 = ops::empty({n}, dt, kCuda);
  Tensor dw1 = ops::empty({s.c * s.k}, dt, kCuda);
  const T *xp = x.data<T>(), *wp = w.data<T>(), *dyp = dy.data<T>();
  if (cudnn) {
    const size_t fb = cuda::causal_conv1d_cudnn_forward_workspace<T>(s.b, s.t, s.c, s.k, stream);
    Tensor fws = device_bytes(fb);
    cuda::causal_conv1d_cudnn_forward<T>(xp, wp, s.b, s.t, s.c, s.k, y.data<T>(), fws.data_ptr(),
                                         fb, stream);
    auto backward = [&](T* dxp, T* dwp) {
      const size_t bb = cuda::causal_conv1d_cudnn_backward_workspace<T>(
          s.b, s.t, s.c, s.k, dxp != nullptr, dwp != nullptr, stream);
      Tensor bws = device_bytes(bb);
      cuda::causal_conv1d_cudnn_backward<T>(xp, wp, dyp, s.b, s.t, s.c, s.k, dxp, dwp,
                                            bws.data_ptr(), bb, stream);
      cuda::synchronize(0);  // bws is freed here
    };
    backward(dx.data<T>(), dw.data<T>());
    backward(dx1.data<T>(), nullptr);
    backward(nullptr, dw1.data<T>());
  } else {
    cuda::causal_conv1d_forward<T>(xp, wp, s.b, s.t, s.c, s.k, y.data<T>(), stream);
    const int64_t ws_elems = cuda::causal_conv1d_backward_workspace(s.b, s.t, s.c, s.k);
    Tensor ws = ops::empty({std::max<int64_t>(ws_elems, 1)}, DType::float32, kCuda);
    auto backward = [&](T* dxp, T* dwp) {
      cuda::causal_conv1d_backward<T>(xp, wp, dyp, s.b, s.t, s.c, s.k, dxp, dwp, ws.data<float>(),
                                      stream);
    };
    backward(dx.data<T>(), dw.data<T>());
    backward(dx1.data<T>(), nullptr);
    backward(nullptr, dw1.data<T>());
  }
  cuda::synchronize(0);
  return ConvOut{y.to_vector(), dx.to_vector(), dw.to_vector(), dx1.to_vector(), dw1.to_vector()};
}

// The CPU kernel in fp64 on the (already rounded) inputs.
ConvOut reference_conv(const ConvShape& s, const std::vector<double>& x,
                       const std::vector<double>& w, const std::vector<double>& dy) {
  ConvOut r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.dw.resize(w.size());
  cpu::causal_conv1d_forward<double>(x.data(), w.data(), s.b, s.t, s.c, s.k, r.y.data());
  cpu::causal_conv1d_backward<double>(x.data(), w.data(), dy.data(), s.b, s.t, s.c, s.k,
                                      r.dx.data(), r.dw.data());
  r.dx_alone = r.dx;
  r.dw_alone = r.dw;
  return r;
}

void expect_conv_close(const ConvOut& got, const ConvOut& want, double tol, const char* what) {
  const std::pair<const char*, std::pair<const std::vector<double>*, const std::vector<double>*>>
      fields[] = {{"y", {&got.y, &want.y}},
                  {"dx", {&got.dx, &want.dx}},
                  {"dw", {&got.dw, &want.dw}},
                  {"dx alone", {&got.dx_alone, &want.dx_alone}},
                  {"dw alone", {&got.dw_alone, &want.dw_alone}}};
  for (const auto& [name, pr] : fields) {
    ASSERT_EQ(pr.first->size(), pr.second->size()) << what << " " << name;
    EXPECT_LE(test::rel_err(*pr.first, *pr.second), tol) << what << " " << name;
  }
}

// Odd shapes: t = 1, t < k, t = k, c = 1 and c not a multiple of 8, k = 1..4, and a few larger.
const ConvShape kConvShapes[] = {
    {1, 1, 1, 1},     {2, 1, 5, 4},    {3, 2, 7, 3},      {2, 3, 13, 4},   {1, 4, 3, 4},
    {2, 9, 6, 2},     {1, 17, 9, 1},   {3, 37, 11, 4},    {2, 5, 1, 3},    {2, 64, 40, 4},
    {1, 300, 130, 3}, {4, 128, 24, 4}, {2, 257, 1000, 4}, {1, 2048, 64, 4}};

// Against fp64: fp32 sums (<= b t terms for dw) stay within 1e-4 of the largest value; bf16
// outputs are rounded once from an fp32 sum (<= 2^-9 of the largest value), so 1e-2 leaves room
// and still catches a bf16 accumulation. cuDNN and the direct kernel: each within that of fp64.
double conv_tol(DType dt) {
  return dt == DType::float32 ? 1e-4 : 1e-2;
}

template <typename T>
void check_cudnn_conv(const ConvShape& s, uint64_t seed) {
  const DType dt = dtype_of<T>::value;
  SCOPED_TRACE(conv_label(s, dt));
  const Tensor x = random({s.b, s.t, s.c}, dt, seed), w = random({s.c, s.k}, dt, seed + 1, 0.5),
               dy = random({s.b, s.t, s.c}, dt, seed + 2);
  const ConvOut ref = reference_conv(s, x.to_vector(), w.to_vector(), dy.to_vector());
  const Tensor xd = ops::to_device(x, kCuda), wd = ops::to_device(w, kCuda),
               dyd = ops::to_device(dy, kCuda);
  const ConvOut cudnn = run_conv_kernels<T>(true, s, xd, wd, dyd);
  const ConvOut again = run_conv_kernels<T>(true, s, xd, wd, dyd);
  const ConvOut direct = run_conv_kernels<T>(false, s, xd, wd, dyd);
  expect_conv_close(cudnn, ref, conv_tol(dt), "cuDNN vs CPU fp64");
  expect_conv_close(direct, ref, conv_tol(dt), "direct vs CPU fp64");
  expect_conv_close(cudnn, direct, conv_tol(dt), "cuDNN vs direct");
  EXPECT_EQ(again.y, cudnn.y) << "y not bitwise reproducible";
  EXPECT_EQ(again.dx, cudnn.dx) << "dx not bitwise reproducible";
  EXPECT_EQ(again.dw, cudnn.dw) << "dw not bitwise reproducible";
  // One backward or two: each gradient is the same computation.
  EXPECT_EQ(cudnn.dx_alone, cudnn.dx);
  EXPECT_EQ(cudnn.dw_alone, cudnn.dw);
}

TEST(CudaNn, CausalConv1dCudnnMatchesCpuAndDirect) {
  uint64_t seed = 300;
  for (const ConvShape& s : kConvShapes) {
    check_cudnn_conv<float>(s, seed);
    check_cudnn_conv<bf16>(s, seed);
    seed += 3;
  }
}

TEST(CudaNn, CausalConv1dCudnnEmptyBatch) {
  void* stream = cuda::current_stream(0);
  for (DType dt : kDtypes) {
    Tensor dw = ops::to_device(ops::ones({3, 2}, dt), kCuda);
    EXPECT_EQ(cuda::causal_conv1d_cudnn_backward_workspace<float>(2, 0, 3, 2, true, true, stream),
              0u);
    if (dt == DType::float32)
      cuda::causal_conv1d_cudnn_backward<float>(nullptr, nullptr, nullptr, 2, 0, 3, 2, nullptr,
                                                dw.data<float>(), nullptr, 0, stream);
    else
      cuda::causal_conv1d_cudnn_backward<bf16>(nullptr, nullptr, nullptr, 2, 0, 3, 2, nullptr,
                                               dw.data<bf16>(), nullptr, 0, stream);
    EXPECT_EQ(dw.to_vector(), std::vector<double>(6, 0.0)) << dtype_name(dt);  // no products
  }
}

TEST(CudaNn, CausalConv1dCudnnRejectsASmallWorkspace) {
  void* stream = cuda::current_stream(0);
  const ConvShape s{2, 16, 8, 4};
  Tensor x = ops::zeros({s.b * s.t * s.c}, DType::float32, kCuda);
  Tensor w = ops::zeros({s.c * s.k}, DType::float32, kCuda);
  Tensor y = ops::empty({s.b * s.t * s.c}, DType::float32, kCuda);
  const size_t need =
      cuda::causal_conv1d_cudnn_forward_workspace<float>(s.b, s.t, s.c, s.k, stream);
  ASSERT_GT(need, 0u);  // at least w' (k = 4 > 1)
  Tensor ws = device_bytes(need);
  EXPECT_THROW(
      cuda::causal_conv1d_cudnn_forward<float>(x.data<float>(), w.data<float>(), s.b, s.t, s.c, s.k,
                                               y.data<float>(), ws.data_ptr(), need - 1, stream),
      std::invalid_argument);
}

// Through the op: GDN_CONV1D=cudnn on CUDA against the CPU op, bitwise reruns (check()).
TEST(CudaNn, CausalConv1dOpOnCudnn) {
  ScopedEnv env("GDN_CONV1D", "cudnn");
  for (DType dt : kDtypes) {
    const std::string n = dtype_name(dt);
    check(
        "cudnn conv " + n, [](auto& z) { return ops::causal_conv1d(z[0], z[1]); },
        {random({2, 37, 24}, dt, 70), random({24, 4}, dt, 71)}, conv_tol(dt));
    check(
        "cudnn conv [C,1,W] t<k " + n, [](auto& z) { return ops::causal_conv1d(z[0], z[1]); },
        {random({1, 2, 3}, dt, 72), random({3, 1, 4}, dt, 73)}, conv_tol(dt));
    check(
        "cudnn conv k=1 " + n, [](auto& z) { return ops::causal_conv1d(z[0], z[1]); },
        {random({3, 50, 17}, dt, 74), random({17, 1}, dt, 75)}, conv_tol(dt));
  }
  // fp64 runs the direct kernel whatever GDN_CONV1D says.
  check(
      "cudnn conv fp64 (direct)", [](auto& z) { return ops::causal_conv1d(z[0], z[1]); },
      {random({2, 9, 5}, DType::float64, 76), random({5, 4}, DType::float64, 77)},
      tol_for(DType::float64));
}

TEST(CudaNn, CausalConv1dBadImplementationIsAnError) {
  ScopedEnv env("GDN_CONV1D", "cuDNN");
  Tensor x = ops::to_device(random({1, 4, 3}, DType::float32, 80), kCuda);
  Tensor w = ops::to_device(random({3, 4}, DType::float32, 81), kCuda);
  try {
    ops::causal_conv1d(x, w);
    ADD_FAILURE() << "GDN_CONV1D=cuDNN accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("GDN_CONV1D"), std::string::npos) << e.what();
  }
}
#endif

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
