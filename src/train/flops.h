// Model FLOPs per token, for tokens/s -> model FLOP utilisation (MFU):
//   matmuls: 2 * (params of every Linear, lm_head included, embeddings excluded) per token
//   forward and twice that backward (6 N in all), plus the gated-delta-rule kernel's own count
//   (DESIGN.md section 3) per layer.
#pragma once
#include "layers/config.h"

namespace gdn::train {

// Training FLOPs (forward + backward) per token at sequence length T.
double train_flops_per_token(const nn::ModelConfig& cfg, int64_t seq_len);
// Peak FLOP/s of a device for MFU: CPU = this machine's measured sgemm; CUDA = a table of dense
// bf16/fp32 tensor-core peaks by device name (0 if unknown).
double device_peak_flops(const std::string& device, bool bf16);

}  // namespace gdn::train
