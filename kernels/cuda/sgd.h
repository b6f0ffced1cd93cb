// CUDA fused SGD update: the contract of kernels/cpu/sgd.h on device pointers, queued on
// `stream` (a cudaStream_t passed as void*).
#pragma once
#include <cstdint>

#include "kernels/optim_update.h"

namespace gdn::cuda {

template <typename T>
void sgd_step(T* param, const T* grad, acc_t<T>* momentum_buf, int64_t n, const kern::SgdStep& step,
              void* stream);

}  // namespace gdn::cuda
