// Linear and Embedding.
#include "layers/linear.h"

namespace gdn::nn {

Tensor new_parameter(const Shape& shape, const InitContext& ctx) {
  MemoryCategoryScope cat(MemCategory::param);
  return ops::empty(shape, ctx.dtype, ctx.device);
}

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, const InitContext& ctx) {
  weight = new_parameter({out_features, in_features}, ctx);
  ops::normal_(weight, 0.0, ctx.std, ctx.gen);
  register_parameter("weight", &weight);
  if (with_bias) {
    bias = new_parameter({out_features}, ctx);
    ops::zero_(bias);
    register_parameter("bias", &bias);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  ModuleScope scope(*this);
  return ops::linear(x, ops::cast(weight, x.dtype()),
                     bias.defined() ? ops::cast(bias, x.dtype()) : Tensor());
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, const InitContext& ctx) {
  weight = new_parameter({num_embeddings, dim}, ctx);
  ops::normal_(weight, 0.0, ctx.std, ctx.gen);
  register_parameter("weight", &weight);
}

Tensor Embedding::forward(const Tensor& ids, DType out_dtype) const {
  ModuleScope scope(*this);
  return ops::cast(ops::embedding(weight, ids), out_dtype);
}

}  // namespace gdn::nn
