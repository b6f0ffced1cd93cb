// CUDA Kimi Delta Attention (kernels/cuda/kda_*.cu) against the CPU fp64 recurrent reference:
// every implementation (recurrent and chunked kernels), fp64, fp32 and bf16, chunk sizes
// 16/32/64, o, ht and every gradient, with GVA, h0/dht, packed sequences, strong decays, K != V
// and K = V = 128; determinism (bitwise equal twice); the op through autograd (CUDA = CPU).
// Label `gpu`: exits 77 without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/kda.h"
#include "src/ops/kimi_delta_rule.h"
#include "src/ops/ops.h"
#include "tests/kda_test_data.h"
#include "tests/test_util.h"
#if defined(GDN_WITH_CUDA)
#include "src/core/cuda/cuda_context.h"
#endif

GDN_TEST_REQUIRES_CUDA();

#if defined(GDN_WITH_CUDA)
namespace gdn::kda {
namespace {

using namespace test_data;

const Device kCuda = Device::cuda(0);

// x on the device (one zero when empty: no zero-byte allocation).
Tensor upload(const Vec& x, DType dt) {
  return x.empty() ? ops::zeros({1}, dt, kCuda)
                   : ops::from_vector(x, {int64_t(x.size())}, dt, kCuda);
}
Tensor buffer(int64_t n, DType dt) {
  return ops::empty({std::max<int64_t>(n, 1)}, dt, kCuda);
}
Vec first(const Tensor& t, size_t n) {
  Vec x = t.to_vector();
  x.resize(n);
  return x;
}

// Forward and backward through forward_cuda / backward_cuda at input type T.
template <typename T>
Result run_cuda(const Problem& p, const Data& d) {
  using A = acc_t<T>;
  const DType dt = dtype_of<T>::value, ad = dtype_of<A>::value;
  const Implementation& impl = implementation_of(p);
  Tensor q = upload(d.q, dt), k = upload(d.k, dt), v = upload(d.v, dt), g = upload(d.g, dt);
  Tensor beta = upload(d.beta, dt), h0 = upload(d.h0, ad), d_o = upload(d.d_o, dt);
  Tensor dht = upload(d.dht, ad);
  Tensor o = buffer(d.v.size(), dt), ht = buffer(d.h0.size() + d.dht.size(), ad);
  Tensor residual = buffer(residual_elems(p), ad);
  Tensor fws = buffer(impl.cuda_forward_workspace(p, sizeof(T)), ad);
  Tensor bws = buffer(impl.cuda_backward_workspace(p, sizeof(T)), ad);
  const Inputs<T> in{q.data<T>(), k.data<T>(),    v.data<T>(),
                     g.data<T>(), beta.data<T>(), p.has_h0 ? h0.data<A>() : nullptr};
  void* stream = cuda::current_stream(0);
  forward_cuda<T>(
      p, in, {o.data<T>(), p.want_ht ? ht.data<A>() : nullptr, residual.data<A>(), fws.data<A>()},
      stream);
  Tensor dq = buffer(d.q.size(), dt), dk = buffer(d.k.size(), dt), dv = buffer(d.v.size(), dt);
  Tensor dg = buffer(d.g.size(), dt), dbeta = buffer(d.beta.size(), dt);
  Tensor dh0 = buffer(d.h0.size(), ad);
  BackwardArgs<T> b;
  b.d_o = d_o.data<T>();
  b.dht = p.want_ht ? dht.data<A>() : nullptr;
  b.residual = residual.data<A>();
  b.workspace = bws.data<A>();
  b.dq = dq.data<T>();
  b.dk = dk.data<T>();
  b.dv = dv.data<T>();
  b.dg = dg.data<T>();
  b.dbeta = dbeta.data<T>();
  b.dh0 = p.has_h0 ? dh0.data<A>() : nullptr;
  backward_cuda<T>(p, in, b, stream);
  Result r;
  r.o = first(o, d.v.size());
  r.ht = first(ht, p.want_ht ? d.dht.size() : 0);
  r.dq = first(dq, d.q.size());
  r.dk = first(dk, d.k.size());
  r.dv = first(dv, d.v.size());
  r.dg = first(dg, d.g.size());
  r.dbeta = first(dbeta, d.beta.size());
  r.dh0 = first(dh0, d.h0.size());
  return r;
}

TEST(CudaKda, EveryImplementationMatchesTheCpuFp64Reference) {
  const Problem shapes[] = {
      problem(2, 75, 2, 4, 16, 12, 16, Impl::recurrent, true, true),
      problem(1, 100, 1, 2, 32, 20, 32, Impl::recurrent, true, true, {0, 1, 40, 64, 100}),
      problem(2, 33, 1, 1, 8, 40, 64, Impl::recurrent, false, false),
      problem(1, 130, 2, 2, 128, 128, 64, Impl::recurrent, true, true),
  };
  for (const Problem& base : shapes)
    for (double g_min : {-0.2, -5.0, -5.1}) {
      Data d = make_data(base, g_min, 17);
      if (g_min == -5.1) std::fill(d.g.begin(), d.g.end(), -5.0);  // -5 on every channel and step
      const Result ref = run_cpu<double>(base, d);
      for (const Implementation& impl : implementations()) {
        Problem p = base;
        p.impl = impl.impl;
        const std::string what = std::string(impl.name) + " K=" + std::to_string(p.K) +
                                 " V=" + std::to_string(p.V) + " C=" + std::to_string(p.chunk) +
                                 " g_min " + std::to_string(g_min);
        expect_close(run_cuda<double>(p, d), ref, 1e-10, what + " fp64");
        expect_close(run_cuda<float>(p, d), ref, 5e-5, what + " fp32");
        expect_close(run_cuda<bf16>(p, d), ref, 2e-2, what + " bf16");
      }
    }
}

TEST(CudaKda, Deterministic) {
  for (const Implementation& impl : implementations()) {
    Problem p = problem(1, 90, 2, 4, 64, 64, 32, Impl::recurrent, true, true, {0, 30, 90});
    p.impl = impl.impl;
    const Data d = make_data(p, -1, 4);
    const Result a = run_cuda<float>(p, d), b = run_cuda<float>(p, d);
    expect_close(a, b, 0, std::string(impl.name) + " fp32 twice");
  }
}

// The op on CUDA equals the op on the CPU through autograd (fp64: every input's gradient).
TEST(CudaKda, OpMatchesCpu) {
  for (const Implementation& impl : implementations()) {
    std::vector<Tensor> grads[2];
    std::vector<double> outs[2];
    for (int dev = 0; dev < 2; ++dev) {
      const Device device = dev == 0 ? Device::cpu() : kCuda;
      Generator gen(9);
      auto in = [&](Shape s) {
        Tensor t = ops::to_device(ops::randn(s, DType::float64, Device::cpu(), &gen), device);
        t.set_requires_grad(true);
        return t;
      };
      std::vector<Tensor> x = {in({1, 40, 1, 8}), in({1, 40, 1, 8}), in({1, 40, 2, 4}),
                               in({1, 40, 2, 8}), in({1, 40, 2}),    in({3, 2, 8, 4})};
      ops::KdaOptions opt;
      opt.impl = impl.impl;
      opt.chunk_size = 16;
      opt.output_final_state = true;
      opt.cu_seqlens = {0, 5, 30, 40};
      const auto r =
          ops::kimi_delta_rule(x[0], ops::l2_norm(x[1]), x[2], ops::neg(ops::softplus(x[3])),
                               ops::sigmoid(x[4]), opt, x[5]);
      const Tensor loss = ops::add(ops::sum(ops::square(r.o)), ops::sum(ops::square(r.ht)));
      loss.backward();
      outs[dev] =
          ops::to_device(ops::concat({ops::reshape(r.o, {-1}), ops::reshape(r.ht, {-1})}, 0),
                         Device::cpu())
              .to_vector();
      for (const Tensor& t : x) grads[dev].push_back(ops::to_device(t.grad(), Device::cpu()));
    }
    EXPECT_LE(test::rel_err(outs[1], outs[0]), 1e-10) << impl.name;
    for (size_t i = 0; i < grads[0].size(); ++i)
      EXPECT_LE(test::rel_err(grads[1][i], grads[0][i]), 1e-10) << impl.name << " input " << i;
  }
}

}  // namespace
}  // namespace gdn::kda
#endif
