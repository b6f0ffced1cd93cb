// cuDNN's fused attention (kernels/cuda/attention_cudnn.h) against the CPU kernel in bf16: forward
// o and lse, backward dq, dk, dv (2e-2 relative to the largest magnitude, as the flash kernel's
// bf16 test), causal and windows {1, 17, >= T}, GQA (H = 2 HKV, 4 HKV) and H = HKV, D in {64,
// 128}; the backward on the other path's lse (the two save the same stats); determinism; the op
// with impl cudnn through autograd; auto falls back for packed sequences and fp32, cudnn there is
// an error. Label `gpu`; exits 77 without a device; skipped where cuDNN's path is not built or the
// device cannot run it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "src/ops/attention.h"
#include "src/ops/ops.h"
#include "tests/attention_problem.h"
#include "tests/cuda_attention_run.h"
#include "tests/test_util.h"

GDN_TEST_REQUIRES_CUDA();

#if defined(GDN_WITH_CUDA)
namespace gdn {
namespace {

using namespace test::cuda_attention;

constexpr double kTol = 2e-2;

// Random bf16 inputs for p, on the CPU.
Inputs bf16_inputs(const attn::Problem& p) {
  return inputs_for(p, DType::bfloat16);
}

Tensor bytes_buffer(int64_t bytes) {
  return ops::empty({std::max<int64_t>((bytes + 3) / 4, 1)}, DType::float32, kCuda);
}

// Skips (returns false) where cuDNN cannot run p on this device.
bool cudnn_runs(const attn::Problem& p) {
  std::string why;
  void* stream = cuda::current_stream(0);
  if (attn::cudnn_workspace_bytes(p, false, stream, &why) < 0 ||
      attn::cudnn_workspace_bytes(p, true, stream, &why) < 0) {
    std::cout << "[ skipped ] cuDNN cannot run this problem: " << why << "\n";
    return false;
  }
  return true;
}

// cuDNN's forward, then cuDNN's backward (or the flash kernel's, on cuDNN's lse).
Outputs run_cudnn(const attn::Problem& p, const Inputs& in, bool flash_backward = false) {
  const Tensor q = ops::to_device(in.q, kCuda), k = ops::to_device(in.k, kCuda);
  const Tensor v = ops::to_device(in.v, kCuda), d_o = ops::to_device(in.d_o, kCuda);
  Tensor o = ops::empty(q.shape(), DType::bfloat16, kCuda);
  Tensor lse = ops::empty({p.B, p.H, p.T}, DType::float32, kCuda);
  Tensor dq = ops::empty(q.shape(), DType::bfloat16, kCuda);
  Tensor dk = ops::empty(k.shape(), DType::bfloat16, kCuda);
  Tensor dv = ops::empty(v.shape(), DType::bfloat16, kCuda);
  void* stream = cuda::current_stream(0);
  Tensor fws = bytes_buffer(attn::cudnn_workspace_bytes(p, false, stream, nullptr));
  attn::forward_cudnn(p, q.data<bf16>(), k.data<bf16>(), v.data<bf16>(), o.data<bf16>(),
                      lse.data<float>(), fws.data_ptr(), stream);
  if (flash_backward) {
    Tensor bws = ops::empty({std::max<int64_t>(attn::cuda_backward_workspace_elems(p), 1)},
                            DType::float32, kCuda);
    attn::backward_cuda<bf16>(p, q.data<bf16>(), k.data<bf16>(), v.data<bf16>(), o.data<bf16>(),
                              lse.data<float>(), d_o.data<bf16>(), dq.data<bf16>(), dk.data<bf16>(),
                              dv.data<bf16>(), bws.data<float>(), stream);
  } else {
    Tensor bws = bytes_buffer(attn::cudnn_workspace_bytes(p, true, stream, nullptr));
    attn::backward_cudnn(p, q.data<bf16>(), k.data<bf16>(), v.data<bf16>(), o.data<bf16>(),
                         lse.data<float>(), d_o.data<bf16>(), dq.data<bf16>(), dk.data<bf16>(),
                         dv.data<bf16>(), bws.data_ptr(), stream);
  }
  cuda::synchronize(0);
  const auto cpu = [](const Tensor& t) { return ops::to_device(t, kCpu); };
  return {cpu(o), cpu(lse), cpu(dq), cpu(dk), cpu(dv)};
}

Outputs run_cpu(const attn::Problem& p, const Inputs& in) {
  Tensor o = ops::empty(in.q.shape(), DType::bfloat16), lse = ops::empty({p.B, p.H, p.T});
  Tensor dq = ops::empty(in.q.shape(), DType::bfloat16);
  Tensor dk = ops::empty(in.k.shape(), DType::bfloat16);
  Tensor dv = ops::empty(in.v.shape(), DType::bfloat16);
  Tensor fws = ops::empty({std::max<int64_t>(attn::forward_workspace_elems(p), 1)});
  Tensor bws = ops::empty({std::max<int64_t>(attn::backward_workspace_elems(p), 1)});
  attn::forward_cpu<bf16>(p, in.q.data<bf16>(), in.k.data<bf16>(), in.v.data<bf16>(),
                          o.data<bf16>(), lse.data<float>(), fws.data<float>());
  attn::backward_cpu<bf16>(p, in.q.data<bf16>(), in.k.data<bf16>(), in.v.data<bf16>(),
                           o.data<bf16>(), lse.data<float>(), in.d_o.data<bf16>(), dq.data<bf16>(),
                           dk.data<bf16>(), dv.data<bf16>(), bws.data<float>());
  return {o, lse, dq, dk, dv};
}

std::string describe(const attn::Problem& p) {
  return "B " + std::to_string(p.B) + " T " + std::to_string(p.T) + " H " + std::to_string(p.H) +
         " HKV " + std::to_string(p.HKV) + " D " + std::to_string(p.D) + " window " +
         std::to_string(p.window);
}

void expect_close(const Outputs& a, const Outputs& b, const std::string& what) {
  EXPECT_LT(test::rel_err(a.o, b.o), kTol) << "o " << what;
  EXPECT_LT(test::rel_err(a.lse, b.lse), kTol) << "lse " << what;
  EXPECT_LT(test::rel_err(a.dq, b.dq), kTol) << "dq " << what;
  EXPECT_LT(test::rel_err(a.dk, b.dk), kTol) << "dk " << what;
  EXPECT_LT(test::rel_err(a.dv, b.dv), kTol) << "dv " << what;
}

using test::attention_problem;

TEST(CudaAttentionCudnn, MatchesTheCpuOverShapesWindowsAndGqa) {
  GDN_SKIP_WITHOUT_CUDNN();
  ASSERT_TRUE(attn::cudnn_sdpa_built()) << "built without the cuDNN frontend";
  for (int64_t T : {64, 130, 1000})
    for (int64_t D : {64, 128})
      for (int64_t window : {int64_t(0), int64_t(1), int64_t(17), T + 3})
        for (int64_t HKV : {4, 2, 1}) {
          const attn::Problem p = attention_problem(T >= 1000 ? 1 : 2, T, 4, HKV, D, window);
          if (!cudnn_runs(p)) continue;
          const Inputs in = bf16_inputs(p);
          expect_close(run_cudnn(p, in), run_cpu(p, in), describe(p));
        }
}

TEST(CudaAttentionCudnn, FlashBackwardRunsOnCudnnStats) {
  GDN_SKIP_WITHOUT_CUDNN();
  const attn::Problem p = attention_problem(2, 130, 4, 2, 64, 17);
  if (!cudnn_runs(p)) GTEST_SKIP();
  const Inputs in = bf16_inputs(p);
  expect_close(run_cudnn(p, in, true), run_cpu(p, in), describe(p) + " (flash backward)");
}

TEST(CudaAttentionCudnn, IsDeterministic) {
  GDN_SKIP_WITHOUT_CUDNN();
  const attn::Problem p = attention_problem(1, 300, 4, 2, 64, 0);
  if (!cudnn_runs(p)) GTEST_SKIP();
  const Inputs in = bf16_inputs(p);
  const Outputs a = run_cudnn(p, in), b = run_cudnn(p, in);
  EXPECT_EQ(a.o.to_vector(), b.o.to_vector());
  EXPECT_EQ(a.dq.to_vector(), b.dq.to_vector());
  EXPECT_EQ(a.dk.to_vector(), b.dk.to_vector());
  EXPECT_EQ(a.dv.to_vector(), b.dv.to_vector());
}

TEST(CudaAttentionCudnn, TheOpPicksCudnnOrFallsBack) {
  GDN_SKIP_WITHOUT_CUDNN();
  const attn::Problem p = attention_problem(1, 100, 4, 2, 64, 17);
  if (!cudnn_runs(p)) GTEST_SKIP();
  const Inputs in = bf16_inputs(p);
  ops::AttentionOptions opt;
  opt.window = p.window;
  for (attn::Impl impl : {attn::Impl::automatic, attn::Impl::cudnn, attn::Impl::flash}) {
    opt.impl = impl;
    Tensor q = ops::to_device(in.q, kCuda).set_requires_grad(true);
    Tensor o = ops::attention(q, ops::to_device(in.k, kCuda), ops::to_device(in.v, kCuda), opt);
    ops::sum(ops::mul(o, ops::to_device(in.d_o, kCuda))).backward();
    const Outputs cpu = run_cpu(p, in);
    EXPECT_LT(test::rel_err(ops::to_device(o.detach(), kCpu), cpu.o), kTol)
        << attn::impl_name(impl);
    EXPECT_LT(test::rel_err(ops::to_device(q.grad(), kCpu), cpu.dq), kTol) << attn::impl_name(impl);
  }
  // Packed sequences and fp32: auto runs the flash kernel, cudnn is an error.
  attn::Problem packed = attention_problem(1, 100, 4, 2, 64, 0, {0, 30, 100});
  const Inputs pin = bf16_inputs(packed);
  opt.cu_seqlens = packed.cu_seqlens;
  opt.window = 0;
  const Tensor q = ops::to_device(pin.q, kCuda), k = ops::to_device(pin.k, kCuda);
  const Tensor v = ops::to_device(pin.v, kCuda);
  opt.impl = attn::Impl::automatic;
  EXPECT_NO_THROW(ops::attention(q, k, v, opt));
  opt.impl = attn::Impl::cudnn;
  EXPECT_ANY_THROW(ops::attention(q, k, v, opt));
  opt.cu_seqlens.clear();
  const Tensor q32 = ops::cast(q, DType::float32), k32 = ops::cast(k, DType::float32);
  const Tensor v32 = ops::cast(v, DType::float32);
  EXPECT_ANY_THROW(ops::attention(q32, k32, v32, opt));
  opt.impl = attn::Impl::automatic;
  EXPECT_NO_THROW(ops::attention(q32, k32, v32, opt));
}

}  // namespace
}  // namespace gdn
#endif
