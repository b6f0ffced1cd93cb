// CPU fused SGD update: OpenMP over independent elements (static schedule).
#include "kernels/cpu/sgd.h"
#include "kernels/cpu/simd.h"
#include "kernels/trace_events.h"

namespace gdn::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 15;  // below this, threads cost more than they save
}  // namespace

template <typename T>
GDN_CPU_CLONES void sgd_step(T* param, const T* grad, acc_t<T>* momentum_buf, int64_t n,
                             const kern::SgdStep& step) {
  using A = acc_t<T>;
  const A lr = A(step.lr), momentum = A(step.momentum);
  const A one_minus_dampening = A(1.0 - step.dampening), wd = A(step.weight_decay);
  A* buf = step.momentum != 0.0 ? momentum_buf : nullptr;
#pragma omp parallel if (n >= kParallelMin)
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      A p = to_acc(param[i]);
      kern::sgd_update<A>(p, to_acc(grad[i]), buf ? buf + i : nullptr, lr, momentum,
                          one_minus_dampening, wd, step.nesterov, step.first);
      param[i] = from_acc<T>(p);
    }
  }
}

template void sgd_step<float>(float*, const float*, float*, int64_t, const kern::SgdStep&);
template void sgd_step<double>(double*, const double*, double*, int64_t, const kern::SgdStep&);

}  // namespace gdn::cpu
