// Builds the kernel layouts (kernels/elementwise_ops.h) from tensors, merging dimensions that
// are contiguous with each other so the kernels loop over as few dims as possible.
#pragma once
#include "kernels/elementwise_ops.h"
#include "src/core/tensor.h"

namespace gdn::ops::detail {

// dst and src of the same shape, any strides.
kern::CopyLayout copy_layout(const Tensor& dst, const Tensor& src);
// Output `out_shape` contiguous; a and b broadcast to it.
kern::BroadcastLayout broadcast_layout(const Shape& out_shape, const Tensor& a, const Tensor& b);

}  // namespace gdn::ops::detail
