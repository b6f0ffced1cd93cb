// CUDA softmax attention and rope (kernels/cuda/attention_cuda.h, rope_cuda.h) against the CPU
// kernels: forward o and lse, backward dq, dk, dv, in fp32 (1e-5 relative to the largest
// magnitude), bf16 (2e-2) and fp64 (1e-12), T in {1, 100, 130, 1000}, D in {32, 64, 128, 256},
// GQA (H = 2 HKV, H = 4 HKV) and H = HKV, windows {0, 1, 17, >= T}, packed sequences
// cu_seqlens {0, 5, 70, 100}; rope forward and inverse (offset, packed, in place); the ops
// through autograd (rope then attention) on CUDA against the CPU; determinism (two runs give the
// same bits). Label `gpu`; exits 77 without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/rope.h"
#include "src/ops/attention.h"
#include "src/ops/ops.h"
#include "src/ops/rope.h"
#include "tests/attention_problem.h"
#include "tests/cuda_attention_run.h"
#include "tests/test_util.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/rope_cuda.h"
#endif

GDN_TEST_REQUIRES_CUDA();

#if defined(GDN_WITH_CUDA)
namespace gdn {
namespace {

using namespace test::cuda_attention;

const std::vector<int64_t> kCu = {0, 5, 70, 100};  // sequences of 5, 65 and 30 tokens

double tolerance(DType dt) {
  return dt == DType::float64 ? 1e-12 : dt == DType::float32 ? 1e-5 : 2e-2;
}

Tensor buffer(int64_t n, DType dt, Device dev) {
  return ops::empty({std::max<int64_t>(n, 1)}, dt, dev);
}

Tensor to_cpu(const Tensor& t) {
  return ops::to_device(t, kCpu);
}

// The kernels' forward and backward on `dev`.
template <typename T>
Outputs run(const attn::Problem& p, const Inputs& in, Device dev) {
  using A = acc_t<T>;
  const DType dt = dtype_of<T>::value, ad = dtype_of<A>::value;
  const Tensor q = ops::to_device(in.q, dev), k = ops::to_device(in.k, dev);
  const Tensor v = ops::to_device(in.v, dev), d_o = ops::to_device(in.d_o, dev);
  Tensor o = ops::empty(q.shape(), dt, dev), lse = ops::empty({p.B, p.H, p.T}, ad, dev);
  Tensor dq = ops::empty(q.shape(), dt, dev), dk = ops::empty(k.shape(), dt, dev);
  Tensor dv = ops::empty(v.shape(), dt, dev);
  if (dev.is_cuda()) {
    void* stream = cuda::current_stream(0);
    Tensor fws = buffer(attn::cuda_forward_workspace_elems(p), ad, dev);
    attn::forward_cuda<T>(p, q.data<T>(), k.data<T>(), v.data<T>(), o.data<T>(), lse.data<A>(),
                          fws.data<A>(), stream);
    Tensor bws = buffer(attn::cuda_backward_workspace_elems(p), ad, dev);
    attn::backward_cuda<T>(p, q.data<T>(), k.data<T>(), v.data<T>(), o.data<T>(), lse.data<A>(),
                           d_o.data<T>(), dq.data<T>(), dk.data<T>(), dv.data<T>(), bws.data<A>(),
                           stream);
    cuda::synchronize(0);
  } else {
    Tensor fws = buffer(attn::forward_workspace_elems(p), ad, dev);
    attn::forward_cpu<T>(p, q.data<T>(), k.data<T>(), v.data<T>(), o.data<T>(), lse.data<A>(),
                         fws.data<A>());
    Tensor bws = buffer(attn::backward_workspace_elems(p), ad, dev);
    attn::backward_cpu<T>(p, q.data<T>(), k.data<T>(), v.data<T>(), o.data<T>(), lse.data<A>(),
                          d_o.data<T>(), dq.data<T>(), dk.data<T>(), dv.data<T>(), bws.data<A>());
  }
  return {to_cpu(o), to_cpu(lse), to_cpu(dq), to_cpu(dk), to_cpu(dv)};
}

Outputs run_dtype(const attn::Problem& p, const Inputs& in, DType dt, Device dev) {
  if (dt == DType::float64) return run<double>(p, in, dev);
  if (dt == DType::float32) return run<float>(p, in, dev);
  return run<bf16>(p, in, dev);
}

std::string describe(const attn::Problem& p, DType dt) {
  std::string s = std::string(dtype_name(dt)) + " B " + std::to_string(p.B) + " T " +
                  std::to_string(p.T) + " H " + std::to_string(p.H) + " HKV " +
                  std::to_string(p.HKV) + " D " + std::to_string(p.D) + " window " +
                  std::to_string(p.window);
  if (p.packed()) s += " packed";
  return s;
}

// Whether every query sees exactly one key (itself): window 1, or sequences of one token.
bool sees_one_key(const attn::Problem& p) {
  if (p.window == 1) return true;
  if (!p.packed()) return p.T == 1;
  for (size_t i = 1; i < p.cu_seqlens.size(); ++i)
    if (p.cu_seqlens[i] - p.cu_seqlens[i - 1] > 1) return false;
  return true;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector()) m = std::max(m, std::abs(x));
  return m;
}

void expect_matches_cpu(const attn::Problem& p, DType dt) {
  const Inputs in = inputs_for(p, dt);
  const Outputs gpu = run_dtype(p, in, dt, kCuda), cpu = run_dtype(p, in, dt, kCpu);
  const double tol = tolerance(dt);
  const std::string what = describe(p, dt);
  EXPECT_LT(test::rel_err(gpu.o, cpu.o), tol) << "o " << what;
  EXPECT_LT(test::rel_err(gpu.lse, cpu.lse), tol) << "lse " << what;
  EXPECT_LT(test::rel_err(gpu.dv, cpu.dv), tol) << "dv " << what;
  if (sees_one_key(p)) {
    // P = 1 on the one key, so dS = P (dP - rowsum(dO o)) = 0: dq = dk = 0 but for rounding on
    // both devices, which a relative comparison of the two would only measure noise against.
    const double scale = max_abs(cpu.dv);
    for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"gpu dq", &gpu.dq},
                                  {"gpu dk", &gpu.dk},
                                  {"cpu dq", &cpu.dq},
                                  {"cpu dk", &cpu.dk}})
      EXPECT_LE(max_abs(*t), tol * scale) << name << " (one key per query) " << what;
    return;
  }
  EXPECT_LT(test::rel_err(gpu.dq, cpu.dq), tol) << "dq " << what;
  EXPECT_LT(test::rel_err(gpu.dk, cpu.dk), tol) << "dk " << what;
}

using test::attention_problem;

TEST(CudaAttention, MatchesTheCpuOverShapesWindowsAndGqa) {
  for (DType dt : {DType::float32, DType::bfloat16})
    for (int64_t T : {1, 100, 130, 1000})
      for (int64_t D : {32, 64, 128, 256})
        for (int64_t window : {int64_t(0), int64_t(1), int64_t(17), T + 3}) {
          // Long sequences with one kv head to keep the CPU reference quick.
          const int64_t B = T >= 1000 ? 1 : 2, H = T >= 1000 ? 2 : 4, HKV = T >= 1000 ? 1 : 2;
          expect_matches_cpu(attention_problem(B, T, H, HKV, D, window), dt);
        }
}

TEST(CudaAttention, MatchesTheCpuWithoutGroupsAndWithWideGroups) {
  for (DType dt : {DType::float32, DType::bfloat16}) {
    expect_matches_cpu(attention_problem(2, 130, 3, 3, 64, 0), dt);
    expect_matches_cpu(attention_problem(1, 130, 8, 2, 128, 17), dt);
    expect_matches_cpu(attention_problem(1, 77, 4, 1, 48, 0), dt);  // D not a power of two
  }
}

TEST(CudaAttention, MatchesTheCpuInFp64) {
  for (int64_t D : {32, 256})
    for (int64_t window : {0, 17})
      expect_matches_cpu(attention_problem(1, 130, 4, 2, D, window), DType::float64);
}

TEST(CudaAttention, PackedSequencesMatchTheCpu) {
  for (DType dt : {DType::float32, DType::bfloat16, DType::float64})
    for (int64_t D : {32, 128, 256})
      for (int64_t window : {0, 1, 2, 17, 33, 200}) {
        attn::Problem p = attention_problem(1, 100, 4, 2, D, window);
        p.cu_seqlens = std::vector<int64_t>(kCu);  // (a copy assignment trips GCC 12's -Wnonnull)
        expect_matches_cpu(p, dt);
      }
}

TEST(CudaAttention, IsDeterministic) {
  for (DType dt : {DType::float32, DType::bfloat16}) {
    attn::Problem p = attention_problem(1, 300, 4, 2, 64, 0);
    p.cu_seqlens = std::vector<int64_t>(kCu.begin(), kCu.end() - 1);
    p.cu_seqlens.push_back(300);
    const Inputs in = inputs_for(p, dt);
    const Outputs a = run_dtype(p, in, dt, kCuda), b = run_dtype(p, in, dt, kCuda);
    EXPECT_EQ(a.o.to_vector(), b.o.to_vector());
    EXPECT_EQ(a.lse.to_vector(), b.lse.to_vector());
    EXPECT_EQ(a.dq.to_vector(), b.dq.to_vector());
    EXPECT_EQ(a.dk.to_vector(), b.dk.to_vector());
    EXPECT_EQ(a.dv.to_vector(), b.dv.to_vector());
  }
}

// ---- rope ---------------------------------------------------------------------------------------

template <typename T>
Tensor rope_kernel(const rope::Problem& p, const Tensor& x_cpu, bool inverse, Device dev,
                   bool in_place) {
  Tensor x = ops::to_device(x_cpu, dev);
  Tensor y = in_place ? x : ops::empty(x.shape(), x.dtype(), dev);
  if (dev.is_cuda()) {
    Tensor ws = buffer((rope::cuda_workspace_bytes(p) + 3) / 4, DType::float32, dev);
    rope::apply_cuda<T>(p, x.data<T>(), y.data<T>(), inverse, ws.data<float>(),
                        cuda::current_stream(0));
    cuda::synchronize(0);
  } else {
    rope::apply_cpu<T>(p, x.data<T>(), y.data<T>(), inverse);
  }
  return to_cpu(y);
}

Tensor rope_dtype(const rope::Problem& p, const Tensor& x, bool inverse, Device dev,
                  bool in_place) {
  if (x.dtype() == DType::float64) return rope_kernel<double>(p, x, inverse, dev, in_place);
  if (x.dtype() == DType::float32) return rope_kernel<float>(p, x, inverse, dev, in_place);
  return rope_kernel<bf16>(p, x, inverse, dev, in_place);
}

TEST(CudaRope, MatchesTheCpu) {
  for (DType dt : {DType::float32, DType::bfloat16, DType::float64})
    for (bool packed : {false, true})
      for (int64_t offset : {0, 37})
        for (bool inverse : {false, true}) {
          rope::Problem p;
          p.B = packed ? 1 : 2;
          p.T = 100;
          p.H = 3;
          p.D = 64;
          p.theta = 10000.0;
          p.offset = offset;
          if (packed) p.cu_seqlens = std::vector<int64_t>(kCu);
          const Tensor x = ops::randn({p.B, p.T, p.H, p.D}, dt);
          const Tensor cpu = rope_dtype(p, x, inverse, kCpu, false);
          for (bool in_place : {false, true}) {
            const Tensor gpu = rope_dtype(p, x, inverse, kCuda, in_place);
            EXPECT_LT(test::rel_err(gpu, cpu), tolerance(dt))
                << dtype_name(dt) << " packed " << packed << " offset " << offset << " inverse "
                << inverse << " in place " << in_place;
          }
        }
}

// ---- the ops through autograd -------------------------------------------------------------------

struct OpGrads {
  Tensor o, dq, dk, dv;
};

OpGrads run_ops(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& r0,
                const ops::AttentionOptions& opt, const ops::RopeOptions& ropt, Device dev) {
  // Fresh leaves (on the CPU to_device would return the caller's tensor itself).
  Tensor q = ops::to_device(ops::contiguous_copy(q0), dev).set_requires_grad(true);
  Tensor k = ops::to_device(ops::contiguous_copy(k0), dev).set_requires_grad(true);
  Tensor v = ops::to_device(ops::contiguous_copy(v0), dev).set_requires_grad(true);
  Tensor o = ops::attention(ops::rope(q, ropt), ops::rope(k, ropt), v, opt);
  ops::sum(ops::mul(o, ops::to_device(r0, dev))).backward();
  return {to_cpu(o.detach()), to_cpu(q.grad()), to_cpu(k.grad()), to_cpu(v.grad())};
}

TEST(CudaAttention, OpsThroughAutogradMatchTheCpu) {
  for (DType dt : {DType::float32, DType::bfloat16})
    for (bool packed : {false, true}) {
      const int64_t B = packed ? 1 : 2, T = 100, H = 4, HKV = 2, D = 64;
      ops::AttentionOptions opt;
      opt.window = 17;
      ops::RopeOptions ropt;
      if (packed) {
        opt.cu_seqlens = std::vector<int64_t>(kCu);
        ropt.cu_seqlens = std::vector<int64_t>(kCu);
      }
      const Tensor q = ops::randn({B, T, H, D}, dt), k = ops::randn({B, T, HKV, D}, dt);
      const Tensor v = ops::randn({B, T, HKV, D}, dt), r = ops::randn({B, T, H, D}, dt);
      const OpGrads gpu = run_ops(q, k, v, r, opt, ropt, kCuda);
      const OpGrads cpu = run_ops(q, k, v, r, opt, ropt, kCpu);
      const double tol = tolerance(dt);
      const std::string what = std::string(dtype_name(dt)) + (packed ? " packed" : "");
      EXPECT_LT(test::rel_err(gpu.o, cpu.o), tol) << what;
      EXPECT_LT(test::rel_err(gpu.dq, cpu.dq), tol) << what;
      EXPECT_LT(test::rel_err(gpu.dk, cpu.dk), tol) << what;
      EXPECT_LT(test::rel_err(gpu.dv, cpu.dv), tol) << what;
    }
}

}  // namespace
}  // namespace gdn
#endif  // GDN_WITH_CUDA
