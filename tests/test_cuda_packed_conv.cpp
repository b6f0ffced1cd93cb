// The causal conv over packed sequences on CUDA (the direct kernel, whatever GDN_CONV1D says:
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

Out run(const Tensor& x0, const Tensor& w0, const Tensor& r0, Device dev) {
  Tensor x = ops::to_device(x0, dev).set_requires_grad(true);
  Tensor w = ops::to_device(w0, dev).set_requires_grad(true);
  Tensor y = ops::causal_conv1d(x, w, kCu);
  ops::sum(ops::mul(y, ops::to_device(r0, dev))).backward();
  return {ops::to_device(y.detach(), Device::cpu()), ops::to_device(x.grad(), Device::cpu()),
          ops::to_device(w.grad(), Device::cpu())};
}

TEST(CudaPackedConv, MatchesTheCpu) {
  for (const char* impl : {"direct", "cudnn"}) {
    setenv("GDN_CONV1D", impl, 1);
    for (DType dt : {DType::float64, DType::float32}) {
      const double tol = dt == DType::float64 ? 1e-12 : 1e-5;
      const int64_t T = kCu.back(), C = 24;
      const Tensor x = ops::randn({1, T, C}, dt), w = ops::randn({C, 4}, dt);
      const Tensor r = ops::randn({1, T, C}, dt);
      const Out cpu = run(x, w, r, Device::cpu()), gpu = run(x, w, r, Device::cuda(0));
      EXPECT_LT(test::rel_err(gpu.y, cpu.y), tol) << impl << " " << dtype_name(dt);
      EXPECT_LT(test::rel_err(gpu.dx, cpu.dx), tol) << impl << " " << dtype_name(dt);
      EXPECT_LT(test::rel_err(gpu.dw, cpu.dw), tol) << impl << " " << dtype_name(dt);
    }
  }
  unsetenv("GDN_CONV1D");
}

}  // namespace
}  // namespace gdn
