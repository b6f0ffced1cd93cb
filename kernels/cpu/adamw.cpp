// CPU fused AdamW update: OpenMP over elements (static schedule; every element is independent,
// so the result does not depend on the thread count).
#include "kernels/cpu/adamw.h"

namespace gdn::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 15;  // below this, threads cost more than they save
}  // namespace

template <typename T>
void adamw_step(T* param, const T* grad, acc_t<T>* exp_avg, acc_t<T>* exp_avg_sq, int64_t n,
                const kern::AdamWStep& step) {
  using A = acc_t<T>;
  const kern::AdamWCoeffs<A> c = kern::adamw_coeffs<A>(step);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    A p = to_acc(param[i]);
    kern::adamw_update<A>(p, to_acc(grad[i]), exp_avg[i], exp_avg_sq[i], c);
    param[i] = from_acc<T>(p);
  }
}

template void adamw_step<float>(float*, const float*, float*, float*, int64_t,
                                const kern::AdamWStep&);
template void adamw_step<double>(double*, const double*, double*, double*, int64_t,
                                 const kern::AdamWStep&);

}  // namespace gdn::cpu
