// ShortConv.
#include "layers/short_conv.h"

#include "src/ops/ops.h"

namespace gdn::nn {

ShortConv::ShortConv(int64_t channels, int64_t width, const InitContext& ctx, cuda::Conv1dImpl impl)
    : impl(impl) {
  weight = new_parameter({channels, 1, width}, ctx);
  ops::normal_(weight, 0.0, ctx.std, ctx.gen);
  register_parameter("weight", &weight);
}

Tensor ShortConv::forward(const Tensor& x, const std::vector<int64_t>& cu_seqlens) const {
  ModuleScope scope(*this);
  return ops::causal_conv1d_silu(x, ops::cast(weight, x.dtype()), cu_seqlens, impl);  // fused
}

Tensor ShortConv::forward_l2norm(const Tensor& x, int64_t head_dim, double eps,
                                 const std::vector<int64_t>& cu_seqlens) const {
  ModuleScope scope(*this);
  return ops::causal_conv1d_silu_l2norm(x, ops::cast(weight, x.dtype()), head_dim, eps, cu_seqlens,
                                        impl);
}

}  // namespace gdn::nn
