// The causal conv over packed sequences on CUDA (the direct kernel, whichever path is asked:
// cuDNN cannot restart inside a row) against the CPU: y, dx and dw in fp64 (1e-12) and fp32
// (1e-5), with sequences shorter than the kernel width. Label `gpu`; exits 77 without a device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "src/ops/ops.h"
#include "tests/test_util.h"

GDN_TEST_REQUIRES_CUDA();

namespace gdn {
namespace {

const std::vector<int64_t> kCu = {0, 2, 3, 10, 13, 40, 41, 300};

struct Out {
  Tensor y, dx, dw;
};

Out run(const Tensor& x0, const Tensor& w0, const Tensor& r0, Device dev, cuda::Conv1dImpl impl) {
  // Fresh leaves (on the CPU to_device would return the caller's tensor itself).
  Tensor x = ops::to_device(ops::contiguous_copy(x0), dev).set_requires_grad(true);
  Tensor w = ops::to_device(ops::contiguous_copy(w0), dev).set_requires_grad(true);
  Tensor y = ops::causal_conv1d(x, w, kCu, impl);
  ops::sum(ops::mul(y, ops::to_device(r0, dev))).backward();
  return {ops::to_device(y.detach(), Device::cpu()), ops::to_device(x.grad(), Device::cpu()),
          ops::to_device(w.grad(), Device::cpu())};
}

TEST(CudaPackedConv, MatchesTheCpu) {
  for (cuda::Conv1dImpl impl : {cuda::Conv1dImpl::direct, cuda::Conv1dImpl::cudnn}) {
    for (DType dt : {DType::float64, DType::float32}) {
      const double tol = dt == DType::float64 ? 1e-12 : 1e-5;
      const int64_t T = kCu.back(), C = 24;
      const Tensor x = ops::randn({1, T, C}, dt), w = ops::randn({C, 4}, dt);
      const Tensor r = ops::randn({1, T, C}, dt);
      const Out cpu = run(x, w, r, Device::cpu(), impl), gpu = run(x, w, r, Device::cuda(0), impl);
      EXPECT_LT(test::rel_err(gpu.y, cpu.y), tol) << enum_name(impl) << " " << dtype_name(dt);
      EXPECT_LT(test::rel_err(gpu.dx, cpu.dx), tol) << enum_name(impl) << " " << dtype_name(dt);
      EXPECT_LT(test::rel_err(gpu.dw, cpu.dw), tol) << enum_name(impl) << " " << dtype_name(dt);
    }
  }
}

}  // namespace
}  // namespace gdn
