// CUDA against CPU for the optimizer kernels: fused AdamW and SGD steps over several steps
// (fp32 and fp64), the fp64 sum of squares behind clip_grad_norm (its value, determinism from
// run to run, clipping of the grads), and a state_dict taken on CUDA loaded on the CPU.
// Label `gpu`; exits 77 without a device.
#include <gtest/gtest.h>

#include <memory>

#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/sgd.h"
#include "src/ops/ops.h"
#include "tests/test_util.h"

GDN_TEST_REQUIRES_CUDA();

namespace gdn {
namespace {

const Device kCuda = Device::cuda(0);

// The same expression in the same precision on both devices; fp32 may differ by FMA
// contraction, a few ulps per step.
double tol_for(DType d) {
  return d == DType::float64 ? 1e-12 : 1e-5;
}

optim::ParamGroup one_group(const Tensor& p, double wd) {
  optim::ParamGroup g;
  g.names = {"w"};
  g.params = {p};
  g.weight_decay = wd;
  return g;
}

// Runs `steps` updates of a fresh optimizer made by `make` on a copy of `init` on `dev`.
template <typename Make>
Tensor run_steps(Make make, const Tensor& init, const std::vector<Tensor>& grads, Device dev) {
  // A fresh leaf: on the CPU to_device returns `init` itself, which the steps would then update.
  Tensor p = ops::to_device(ops::contiguous_copy(init), dev).set_requires_grad(true);
  auto opt = make(one_group(p, 0.1));
  for (const Tensor& g : grads) {
    p.set_grad(ops::to_device(g, dev));
    opt->step();
  }
  return p;
}

TEST(CudaOptim, AdamWMatchesCpu) {
  for (DType dt : {DType::float32, DType::float64}) {
    Generator gen(1);
    // Larger than one grid's worth of elements per thread, and not a multiple of 256.
    Tensor init = ops::cast(ops::randn({1000, 301}, DType::float32, Device::cpu(), &gen), dt);
    std::vector<Tensor> grads;
    for (int t = 0; t < 4; ++t)
      grads.push_back(ops::cast(ops::randn({1000, 301}, DType::float32, Device::cpu(), &gen), dt));
    auto make = [](optim::ParamGroup g) {
      optim::AdamWOptions o;
      o.lr = 1e-2;
      return std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup>{g}, o);
    };
    Tensor cpu = run_steps(make, init, grads, Device::cpu());
    Tensor gpu = run_steps(make, init, grads, kCuda);
    EXPECT_LT(test::rel_err(gpu, cpu), tol_for(dt)) << dtype_name(dt);
  }
}

TEST(CudaOptim, SgdMatchesCpu) {
  for (bool nesterov : {false, true}) {
    Generator gen(2);
    Tensor init = ops::randn({777}, DType::float32, Device::cpu(), &gen);
    std::vector<Tensor> grads;
    for (int t = 0; t < 3; ++t)
      grads.push_back(ops::randn({777}, DType::float32, Device::cpu(), &gen));
    auto make = [nesterov](optim::ParamGroup g) {
      optim::SgdOptions o;
      o.lr = 0.05;
      o.momentum = 0.9;
      o.nesterov = nesterov;
      return std::make_unique<optim::Sgd>(std::vector<optim::ParamGroup>{g}, o);
    };
    Tensor cpu = run_steps(make, init, grads, Device::cpu());
    Tensor gpu = run_steps(make, init, grads, kCuda);
    EXPECT_LT(test::rel_err(gpu, cpu), 1e-5) << "nesterov " << nesterov;
  }
}

TEST(CudaOptim, GradNormMatchesCpuAndIsDeterministic) {
  Generator gen(3);
  std::vector<Tensor> cpu_params, gpu_params;
  for (int64_t n : {1, 255, 256, 257, 100000, 3000001}) {
    Tensor g = ops::randn({n}, DType::float32, Device::cpu(), &gen);
    Tensor pc = ops::zeros({n}).set_requires_grad(true);
    pc.set_grad(g);
    Tensor pg = ops::zeros({n}, DType::float32, kCuda).set_requires_grad(true);
    pg.set_grad(ops::to_device(g, kCuda));
    cpu_params.push_back(pc);
    gpu_params.push_back(pg);
  }
  const double cpu = optim::grad_norm(cpu_params);
  const double gpu = optim::grad_norm(gpu_params);
  EXPECT_NEAR(gpu, cpu, 1e-12 * cpu);
  EXPECT_EQ(optim::grad_norm(gpu_params), gpu);  // same bits on a second run
  EXPECT_EQ(optim::clip_grad_norm(gpu_params, 1.0), gpu);
  EXPECT_NEAR(optim::grad_norm(gpu_params), 1.0, 1e-5);
  optim::clip_grad_norm(cpu_params, 1.0);
  for (size_t i = 0; i < cpu_params.size(); ++i)
    EXPECT_LT(test::rel_err(gpu_params[i].grad(), cpu_params[i].grad()), 1e-6) << i;
}

// Moments taken on CUDA load into a CPU optimizer (copied across devices), and both continue
// alike.
TEST(CudaOptim, StateDictAcrossDevices) {
  Generator gen(4);
  Tensor init = ops::randn({64}, DType::float32, Device::cpu(), &gen);
  Tensor g1 = ops::randn({64}, DType::float32, Device::cpu(), &gen);
  Tensor g2 = ops::randn({64}, DType::float32, Device::cpu(), &gen);
  Tensor pg = ops::to_device(init, kCuda).set_requires_grad(true);
  optim::AdamW on_gpu({one_group(pg, 0.0)});
  pg.set_grad(ops::to_device(g1, kCuda));
  on_gpu.step();
  Tensor pc = ops::to_device(pg.detach(), Device::cpu()).set_requires_grad(true);
  optim::AdamW on_cpu({one_group(pc, 0.0)});
  on_cpu.load_state_dict(on_gpu.state_dict());
  EXPECT_EQ(on_cpu.step_count(), 1);
  pg.set_grad(ops::to_device(g2, kCuda));
  pc.set_grad(g2);
  on_gpu.step();
  on_cpu.step();
  EXPECT_LT(test::rel_err(pg, pc), 1e-6);
}

}  // namespace
}  // namespace gdn
