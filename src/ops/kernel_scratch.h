// What the ops that call kernels share: the accumulator dtype of an input dtype (the kernels'
// acc_t), and workspace tensors, tagged `workspace` so that the memory profile sees them.
#pragma once
#include <algorithm>

#include "src/core/allocator.h"
#include "src/ops/ops.h"

namespace gdn::ops::detail {

// float64 for float64 inputs, else float32 (bf16 and fp32 inputs accumulate in fp32).
inline DType acc_dtype(DType d) {
  return d == DType::float64 ? DType::float64 : DType::float32;
}

// A kernel's scratch of `elems` elements (freed when the tensor goes); at least one, so that a
// kernel needing none makes no zero-byte allocation on a device.
inline Tensor workspace(int64_t elems, DType dtype, Device device) {
  MemoryCategoryScope cat(MemCategory::workspace);
  return empty({std::max<int64_t>(elems, 1)}, dtype, device);
}

}  // namespace gdn::ops::detail
