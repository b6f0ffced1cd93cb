// Embedding: rows of W [V, D], initialised N(0, initializer_range) as fla does; the rows are
// cast to the compute dtype at use (fp32 masters train under bf16 activations).
#pragma once
#include "layers/module.h"

namespace gdn::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, const InitContext& ctx);
  // ids int32/int64 [...] -> [..., dim] in `out_dtype`.
  Tensor forward(const Tensor& ids, DType out_dtype) const;
  Tensor weight;
};

}  // namespace gdn::nn
