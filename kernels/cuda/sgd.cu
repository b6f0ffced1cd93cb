// CUDA fused SGD update: a grid-stride loop over independent elements; the element math is
// shared with the CPU kernel (kern::sgd_update).
#include <cuda_runtime.h>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/launch_math.h"
#include "kernels/cuda/sgd.h"

namespace gdn::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void sgd_kernel(T* param, const T* grad, acc_t<T>* buf, int64_t n, acc_t<T> lr,
                           acc_t<T> momentum, acc_t<T> one_minus_dampening, acc_t<T> wd,
                           bool nesterov, bool first) {
  using A = acc_t<T>;
  GDN_GRID_LOOP(i, n) {
    A p = to_acc(param[i]);
    kern::sgd_update<A>(p, to_acc(grad[i]), buf ? buf + i : nullptr, lr, momentum,
                        one_minus_dampening, wd, nesterov, first);
    param[i] = from_acc<T>(p);
  }
}

}  // namespace

template <typename T>
void sgd_step(T* param, const T* grad, acc_t<T>* momentum_buf, int64_t n, const kern::SgdStep& step,
              void* stream) {
  using A = acc_t<T>;
  if (n == 0) return;
  A* buf = step.momentum != 0.0 ? momentum_buf : nullptr;
  sgd_kernel<T><<<grid_1d(n, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      param, grad, buf, n, A(step.lr), A(step.momentum), A(1.0 - step.dampening),
      A(step.weight_decay), step.nesterov, step.first);
  GDN_KCUDA_LAUNCHED("sgd");
}

template void sgd_step<float>(float*, const float*, float*, int64_t, const kern::SgdStep&, void*);
template void sgd_step<double>(double*, const double*, double*, int64_t, const kern::SgdStep&,
                               void*);

}  // namespace gdn::cuda
