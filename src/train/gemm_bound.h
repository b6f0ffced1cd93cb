// The limit a training step's dense products set: every Linear's three GEMMs of one step (the
// forward y = x W^T, the backward dx = dy W and dW = dy^T x, on `rows` = batch x seq tokens per
// micro-batch), the LM head's included (the embedding's when tied), each distinct shape timed
// alone through the ops the step runs (ops::linear, ops::matmul) on the run's device, in this
// run, the best of five rounds over every shape (after one of warm-up). gdn train logs it as
// gemm_bound_ms, and of_gemm_bound = gemm_bound_ms / the step's time: the share of the step its
// GEMMs would take at the rate they run at here. The rest of the step is everything else (the token
// mixer's kernel, conv, norms, element-wise work, allocation, threading); 1 is the limit.
#pragma once
#include <cstdint>

#include "layers/model.h"

namespace gdn::train {

struct GemmBound {
  double ms = 0;      // the step's GEMMs, each timed alone
  double gflop = 0;   // their FLOPs (2 M N K each)
  int64_t gemms = 0;  // how many (3 per Linear and micro-batch)
};

GemmBound measure_gemm_bound(const nn::CausalLM& model, int64_t rows, int64_t micro_batches,
                             Device device, DType dtype);

}  // namespace gdn::train
