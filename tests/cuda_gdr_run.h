// The CUDA gated-delta-rule tests' device side: inputs uploaded, buffers, and one forward plus
// backward through forward_cuda / backward_cuda (tests/test_cuda_gdr.cpp, test_cuda_packed.cpp).
#pragma once
#if defined(GDN_WITH_CUDA)
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/gdr_cuda.h"
#include "kernels/gated_delta_rule.h"
#include "src/core/cuda/cuda_context.h"
#include "src/ops/ops.h"
#include "tests/gdr_test_data.h"

namespace gdn::gdr::cuda_run {

// The test data's names (Data, Result, Vec, ...) come with this namespace's.
using namespace test_data;

inline const Device kCuda = Device::cuda(0);

// x on the device (one element when empty: no zero-byte allocation).
inline Tensor upload(const Vec& x, DType dt) {
  return ops::from_vector(x, {int64_t(std::max<size_t>(x.size(), 1))}, dt, kCuda);
}
inline Tensor device_buffer(int64_t n, DType dt) {
  return ops::empty({std::max<int64_t>(n, 1)}, dt, kCuda);
}

// Forward and backward through forward_cuda / backward_cuda; `d` is already rounded to T (h0, dht
// with one row per sequence).
template <typename T>
Result run_cuda(const Problem& p, const Data& d) {
  using A = acc_t<T>;
  const DType dt = dtype_of<T>::value, ad = dtype_of<A>::value;
  Tensor q = upload(d.q, dt), k = upload(d.k, dt), v = upload(d.v, dt), g = upload(d.g, dt);
  Tensor beta = upload(d.beta, dt), h0 = upload(d.h0, ad), d_o = upload(d.d_o, dt);
  Tensor dht = upload(d.dht, ad);
  Tensor o = device_buffer(d.v.size(), dt), ht = device_buffer(d.h0.size(), ad);
  Tensor residual = device_buffer(residual_elems(p), ad);
  Tensor fws = device_buffer(cuda_forward_workspace_elems(p, sizeof(T)), ad);
  Tensor bws = device_buffer(cuda_backward_workspace_elems(p, sizeof(T)), ad);
  const Inputs<T> in{q.data<T>(),
                     k.data<T>(),
                     v.data<T>(),
                     g.data<T>(),
                     p.impl == Impl::ssd ? nullptr : beta.data<T>(),
                     p.has_h0 ? h0.data<A>() : nullptr};
  void* stream = cuda::current_stream(0);
  forward_cuda<T>(p, in,
                  ForwardOutputs<T>{o.data<T>(), p.want_ht ? ht.data<A>() : nullptr,
                                    residual.data<A>(), fws.data<A>()},
                  stream);
  Tensor dq = device_buffer(d.q.size(), dt), dk = device_buffer(d.k.size(), dt);
  Tensor dv = device_buffer(d.v.size(), dt), dg = device_buffer(d.g.size(), dt);
  Tensor dbeta = device_buffer(d.g.size(), dt), dh0 = device_buffer(d.h0.size(), ad);
  backward_cuda<T>(
      p, in,
      BackwardArgs<T>{d_o.data<T>(), p.want_ht ? dht.data<A>() : nullptr, residual.data<A>(),
                      bws.data<A>(), dq.data<T>(), dk.data<T>(), dv.data<T>(), dg.data<T>(),
                      dbeta.data<T>(), p.has_h0 ? dh0.data<A>() : nullptr},
      stream);
  Result r;
  r.o = o.to_vector();
  if (p.want_ht) r.ht = ht.to_vector();
  r.dq = dq.to_vector();
  r.dk = dk.to_vector();
  r.dv = dv.to_vector();
  r.dg = dg.to_vector();
  r.dbeta = dbeta.to_vector();
  if (p.has_h0) r.dh0 = dh0.to_vector();
  r.o.resize(d.v.size());
  r.ht.resize(p.want_ht ? d.h0.size() : 0);
  r.dh0.resize(p.has_h0 ? d.h0.size() : 0);
  return r;
}

}  // namespace gdn::gdr::cuda_run
#endif
