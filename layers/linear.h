// Linear (y = x W^T [+ b], W [out, in]) and Embedding (rows of W [V, D]), initialised
// N(0, std) as fla does. Weights are fp32 masters; they are cast to the input's dtype at use,
// so bf16 activations train fp32 weights.
#pragma once
#include "layers/module.h"
#include "src/ops/ops.h"

namespace gdn::nn {

struct InitContext {
  Device device = Device::cpu();
  DType dtype = DType::float32;  // parameter (master) dtype
  Generator* gen = nullptr;      // null: default generator
  double std = 0.02;             // initializer_range
};

// A new parameter tensor tagged `param`.
Tensor new_parameter(const Shape& shape, const InitContext& ctx);

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, const InitContext& ctx);
  // ids int32/int64 [...] -> [..., dim] in `out_dtype`.
  Tensor forward(const Tensor& ids, DType out_dtype) const;
  Tensor weight;
};

}  // namespace gdn::nn
