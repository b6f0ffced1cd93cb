// The CUDA checks of kernels/cuda/{gemm,nn,conv_cudnn} that are not rows of the op table (the
// table's own CUDA-vs-CPU parity is tests/test_cuda_parity.cpp): the empty matmul, bad targets
// and indices reported as errors, and the cuDNN conv (kernels/cuda/conv_cudnn.h) on the kernel
// API: y, dx, dw (together and alone) against the CPU kernel in fp64 and against the direct
// kernel on odd shapes (t = 1, t < k, c not a multiple of 8, k = 1..4), bitwise reruns, empty
// batches; and through the op with impl cudnn (model.conv1d_impl; table-style cases run by the
// parity harness). Label `gpu`; exits 77 without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

// The kernel headers are plain declarations: included in every build, called only with CUDA.
#include "kernels/cpu/nn.h"
#include "kernels/cuda/conv_cudnn.h"
#include "kernels/cuda/nn.h"
#include "src/core/cuda/cuda_context.h"
#include "src/ops/op_cases.h"
#include "src/ops/ops.h"
#include "tests/op_parity.h"
#include "tests/test_util.h"

GDN_TEST_REQUIRES_CUDA();

namespace gdn {
namespace {

const Device kCuda = Device::cuda(0);
const DType kDtypes[] = {DType::float32, DType::bfloat16};

// K = 0: the product of empty matrices is zeros (cuBLAS is not called).
TEST(CudaNn, MatmulOfEmptyMatricesIsZeros) {
  Tensor e = ops::matmul(ops::empty({3, 0}, DType::float32, kCuda),
                         ops::empty({0, 4}, DType::float32, kCuda));
  test::expect_values(e, std::vector<double>(12, 0.0), 0);
}

// A target outside the vocabulary is reported with its row, as on the CPU; the logits and
// targets are the table's cross-entropy case.
TEST(CudaNn, CrossEntropyReportsBadTargets) {
  const ops::OpCase& ce = ops::op_case("cross_entropy_int64_targets");
  for (DType dt : kDtypes) {
    const Tensor logits = ops::make_inputs(ce, dt, kCuda)[0];
    std::vector<double> bad = ce.inputs[1].values;
    bad[11] = 101;
    EXPECT_THROW(ops::cross_entropy(logits, ops::from_vector(bad, {37}, DType::int64, kCuda)),
                 Error);
    bad[11] = -3;
    EXPECT_THROW(ops::cross_entropy(logits, ops::from_vector(bad, {37}, DType::int32, kCuda)),
                 Error);
  }
}

// An index outside the vocabulary of the table's embedding case is an error.
TEST(CudaNn, EmbeddingReportsBadIndices) {
  for (DType dt : kDtypes) {
    const Tensor w = ops::make_inputs(ops::op_case("embedding_int64_ids"), dt, kCuda)[0];
    EXPECT_THROW(ops::embedding(w, ops::from_vector({1, 50}, {2}, DType::int64, kCuda)), Error);
    EXPECT_THROW(ops::embedding(w, ops::from_vector({-1}, {1}, DType::int32, kCuda)), Error);
  }
}

#if defined(GDN_WITH_CUDA)
// N(0, scale^2) drawn in fp32 from `seed`, then cast: the cuDNN checks' operands.
Tensor random(const Shape& s, DType dt, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return ops::cast(ops::mul(ops::randn(s, DType::float32, Device::cpu(), &g), scale), dt);
}

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
  GDN_SKIP_WITHOUT_CUDNN();
  uint64_t seed = 300;
  for (const ConvShape& s : kConvShapes) {
    check_cudnn_conv<float>(s, seed);
    check_cudnn_conv<bf16>(s, seed);
    seed += 3;
  }
}

TEST(CudaNn, CausalConv1dCudnnEmptyBatch) {
  GDN_SKIP_WITHOUT_CUDNN();
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
  GDN_SKIP_WITHOUT_CUDNN();
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

// Through the op with impl cudnn (model.conv1d_impl) on CUDA against the CPU op, with the parity
// harness (bitwise reruns included) at conv_tol; fp64 runs the direct kernel whatever impl says.
TEST(CudaNn, CausalConv1dOpOnCudnn) {
  GDN_SKIP_WITHOUT_CUDNN();
  using In = ops::InputSpec;
  const ops::Tolerance tolerance{1e-10, conv_tol(DType::float32), conv_tol(DType::bfloat16)};
  const std::vector<DType> fp32_and_bf16(std::begin(kDtypes), std::end(kDtypes));
  auto conv = [&](const char* name, Shape x, Shape w, std::vector<DType> dtypes) {
    return ops::OpCase{
        name,
        {In::normal(std::move(x)), In::normal(std::move(w))},
        [](auto& z) { return ops::causal_conv1d(z[0], z[1], {}, cuda::Conv1dImpl::cudnn); },
        false,
        std::move(dtypes),
        tolerance};
  };
  const ops::OpCase cases[] = {
      conv("cudnn_conv", {2, 37, 24}, {24, 4}, fp32_and_bf16),
      conv("cudnn_conv_weight_c1w_t_below_k", {1, 2, 3}, {3, 1, 4}, fp32_and_bf16),
      conv("cudnn_conv_k1", {3, 50, 17}, {17, 1}, fp32_and_bf16),
      conv("cudnn_conv_fp64_direct", {2, 9, 5}, {5, 4}, {DType::float64})};
  for (const ops::OpCase& c : cases)
    for (DType dt : c.parity_dtypes) test::expect_cuda_matches_cpu(c, dt);
}

#endif

}  // namespace
}  // namespace gdn
