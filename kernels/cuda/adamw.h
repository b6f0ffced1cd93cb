// CUDA fused AdamW update: the contract of kernels/cpu/adamw.h on device pointers, queued on
// `stream` (a cudaStream_t passed as void*).
#pragma once
#include <cstdint>

#include "kernels/optim_update.h"

namespace gdn::cuda {

template <typename T>
void adamw_step(T* param, const T* grad, acc_t<T>* exp_avg, acc_t<T>* exp_avg_sq, int64_t n,
                const kern::AdamWStep& step, void* stream);

}  // namespace gdn::cuda
