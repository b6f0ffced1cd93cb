// CUDA fused AdamW update: a grid-stride loop, one element per thread per iteration; the
// scalars are folded on the host (kern::adamw_coeffs) and the element math is shared with the
// CPU kernel (kern::adamw_update).
#include <cuda_runtime.h>

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/launch_math.h"

namespace gdn::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void adamw_kernel(T* param, const T* grad, acc_t<T>* exp_avg, acc_t<T>* exp_avg_sq,
                             int64_t n, kern::AdamWCoeffs<acc_t<T>> c) {
  using A = acc_t<T>;
  GDN_GRID_LOOP(i, n) {
    A p = to_acc(param[i]);
    A m = exp_avg[i], v = exp_avg_sq[i];
    kern::adamw_update<A>(p, to_acc(grad[i]), m, v, c);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = from_acc<T>(p);
  }
}

}  // namespace

template <typename T>
void adamw_step(T* param, const T* grad, acc_t<T>* exp_avg, acc_t<T>* exp_avg_sq, int64_t n,
                const kern::AdamWStep& step, void* stream) {
  if (n == 0) return;
  adamw_kernel<T><<<grid_1d(n, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      param, grad, exp_avg, exp_avg_sq, n, kern::adamw_coeffs<acc_t<T>>(step));
  GDN_KCUDA_LAUNCHED("adamw");
}

template void adamw_step<float>(float*, const float*, float*, float*, int64_t,
                                const kern::AdamWStep&, void*);
template void adamw_step<double>(double*, const double*, double*, double*, int64_t,
                                 const kern::AdamWStep&, void*);

}  // namespace gdn::cuda
