// The LM head and the loss in one op: mean over non-ignored rows of cross_entropy(h W^T, t),
// computed over chunks of rows so the fp32 logits never exist for all [N, V] at once. The
// gradients are computed chunk by chunk in the forward and kept (dh [N, d], dW [V, d]), which is
// far smaller than the logits for a large vocabulary; backward only scales them.
#pragma once
#include "src/core/tensor.h"

namespace gdn::ops {

// h [N, d] (any float dtype), w [V, d] (fp32 master or any float), targets [N] int32/int64.
// chunk_rows 0 picks chunks of 32 MiB of fp32 logits. The loss is fp32 (fp64 for fp64).
Tensor linear_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets,
                            int64_t ignore_index = -100, int64_t chunk_rows = 0);

}  // namespace gdn::ops
