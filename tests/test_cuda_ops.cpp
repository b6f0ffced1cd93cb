// The CUDA checks of kernels/cuda/{elementwise,gemm} and the allocator that are not rows of the
// op table (element-wise ops and their backward are, in tests/test_cuda_parity.cpp): in-place
// updates, fill, random streams, casts and device copies, device memory accounting, and the
// TF32 switch of fp32 GEMMs. Label `gpu`; exits 77 without a device.
#include <gtest/gtest.h>

#include "src/ops/ops.h"
#include "tests/test_util.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/gemm.h"
#endif

GDN_TEST_REQUIRES_CUDA();

namespace gdn {
namespace {

const Device kCuda = Device::cuda(0);

Tensor on_cuda(const Tensor& t) {
  return ops::to_device(t, kCuda);
}

#if defined(GDN_WITH_CUDA)
// fp32 GEMMs are true fp32 by default; allow_tf32 moves them to TF32 tensor cores: an error of
// TF32's 10-bit products (well above fp32's, well below bf16's), and still the same bits twice.
TEST(CudaOps, Fp32GemmIsExactUnlessTf32IsAllowed) {
  Generator g(5);
  Tensor a = ops::randn({96, 256}, DType::float32, Device::cpu(), &g);
  Tensor b = ops::randn({256, 80}, DType::float32, Device::cpu(), &g);
  const Tensor want = ops::matmul(ops::cast(a, DType::float64), ops::cast(b, DType::float64));
  ASSERT_FALSE(cuda::allow_tf32());
  const double exact = test::rel_err(ops::matmul(on_cuda(a), on_cuda(b)), want);
  EXPECT_LT(exact, 1e-6);
  cuda::set_allow_tf32(true);
  const Tensor once = ops::matmul(on_cuda(a), on_cuda(b));
  const Tensor twice = ops::matmul(on_cuda(a), on_cuda(b));
  cuda::set_allow_tf32(false);
  const double tf32 = test::rel_err(once, want);
  EXPECT_GT(tf32, 1e-5) << "TF32 was asked for, but the product looks like true fp32";
  EXPECT_LT(tf32, 5e-3);
  EXPECT_EQ(test::rel_err(once, twice), 0.0);
  EXPECT_LT(test::rel_err(ops::matmul(on_cuda(a), on_cuda(b)), want), 1e-6);
}
#endif  // GDN_WITH_CUDA

TEST(CudaOps, FillRandomAndInPlace) {
  Generator gc(11), gh(11);
  // The same Philox counters on both devices: identical streams up to float rounding.
  Tensor rc = ops::randn({4096}, DType::float32, kCuda, &gc);
  Tensor rh = ops::randn({4096}, DType::float32, Device::cpu(), &gh);
  EXPECT_LT(test::rel_err(rc, rh), 1e-6);
  Tensor uc = ops::rand({4096}, DType::float64, kCuda, &gc);
  Tensor uh = ops::rand({4096}, DType::float64, Device::cpu(), &gh);
  EXPECT_LT(test::rel_err(uc, uh), 1e-15);
  EXPECT_EQ(ops::randint({999}, 0, 50, DType::int64, kCuda, &gc).to_vector(),
            ops::randint({999}, 0, 50, DType::int64, Device::cpu(), &gh).to_vector());
  Tensor f = ops::full({3, 3}, 2.5, DType::bfloat16, kCuda);
  test::expect_values(f, std::vector<double>(9, 2.5), 0);
  Tensor acc = ops::ones({5}, DType::float32, kCuda);
  ops::add_(acc, ops::full({5}, 2.0, DType::float32, kCuda), 0.5);
  ops::mul_(acc, 3.0);
  test::expect_values(acc, std::vector<double>(5, 6.0), 0);
}

TEST(CudaOps, CastsAndCopiesMatchCpu) {
  Generator g(5);
  Tensor a = ops::randn({2, 3, 4}, DType::float32, Device::cpu(), &g);
  for (DType dt : {DType::float64, DType::bfloat16, DType::float16, DType::int32, DType::int64}) {
    Tensor scaled = ops::mul(a, 10.0);
    Tensor host = ops::cast(scaled, dt);
    Tensor dev = ops::cast(on_cuda(scaled), dt);
    EXPECT_EQ(dev.device(), kCuda);
    EXPECT_EQ(dev.to_vector(), host.to_vector()) << dtype_name(dt);  // casts are exact maps
  }
  Tensor t = ops::permute(on_cuda(a), {2, 0, 1});
  EXPECT_EQ(ops::contiguous(t).to_vector(),
            ops::contiguous(ops::permute(a, {2, 0, 1})).to_vector());
  // Device memory is accounted like host memory.
  MemoryStats before = memory_stats(kCuda);
  {
    Tensor big = ops::empty({1 << 20}, DType::float32, kCuda);
    EXPECT_EQ(memory_stats(kCuda).total - before.total, 4 << 20);
  }
  EXPECT_EQ(memory_stats(kCuda).total, before.total);
  EXPECT_GE(memory_stats(kCuda).reserved, 4 << 20);  // the block stays cached
}

}  // namespace
}  // namespace gdn
