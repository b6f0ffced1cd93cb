// The fused CUDA kernels run by the CPU emulator (kernels/cuda/gdr_fused_emulate.h) on test data,
// forward and backward, every output in fp64: shared by test_fused_emulation (against the fp64
// reference) and test_cuda_gdr (against the GPU).
#pragma once
#include <vector>

#include "kernels/cuda/gdr_fused_emulate.h"
#include "tests/gdr_test_data.h"

namespace gdn::gdr::test_data {

// `vt`: the V tile width; `reversed`: the emulator runs each phase's threads in reverse; `sub`:
// the kernels' chunk (0: p.chunk; a divisor steps through each chunk in sub-chunks).
template <typename T>
Result run_fused_emulated(const Problem& p, int64_t vt, const Data& d, bool reversed = false,
                          int64_t sub = 0) {
  using A = acc_t<T>;
  const auto q = cast<T>(d.q), k = cast<T>(d.k), v = cast<T>(d.v), g = cast<T>(d.g),
             beta = cast<T>(d.beta), d_o = cast<T>(d.d_o);
  const auto h0 = cast<A>(d.h0), dht = cast<A>(d.dht);
  std::vector<T> o(v.size());
  std::vector<A> ht(h0.size()), residual(residual_elems(p));
  const Inputs<T> in{q.data(), k.data(),    v.data(),
                     g.data(), beta.data(), p.has_h0 ? h0.data() : nullptr};
  fused::emulate_forward<T>(
      p, vt, in, ForwardOutputs<T>{o.data(), p.want_ht ? ht.data() : nullptr, residual.data()},
      reversed, sub);
  std::vector<T> dq(q.size()), dk(k.size()), dv(v.size()), dg(g.size()), dbeta(g.size());
  std::vector<A> dh0(h0.size()), workspace(fused::backward_workspace(p, sizeof(T), sub));
  fused::emulate_backward<T>(
      p, vt, in,
      BackwardArgs<T>{d_o.data(), p.want_ht ? dht.data() : nullptr, residual.data(),
                      workspace.data(), dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(),
                      p.has_h0 ? dh0.data() : nullptr},
      reversed, sub);
  Result r;
  r.o = to_double(o);
  if (p.want_ht) r.ht = to_double(ht);
  store_gradients(p, dq, dk, dv, dg, dbeta, dh0, r);
  return r;
}

}  // namespace gdn::gdr::test_data
