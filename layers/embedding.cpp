// Embedding.
#include "layers/embedding.h"

#include "src/ops/ops.h"

namespace gdn::nn {

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
