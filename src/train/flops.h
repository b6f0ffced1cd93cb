// Model FLOPs per token, for tokens/s -> model FLOP utilisation (MFU):
//   matmuls: 2 * (params of every Linear, lm_head included, embeddings excluded) per token
//   forward and twice that backward (6 N in all), plus each token mixer's kernel count (its
//   registry entry, layers/token_mixer.h; the gated delta rule's is in docs/design.md, "The gated
//   delta rule").
#pragma once
#include "layers/config.h"

namespace gdn::train {

// Training FLOPs (forward + backward) per token at sequence length T, the kernels running the
// chunk they run on `device` (ModelConfig::kernel_chunk).
double train_flops_per_token(const nn::ModelConfig& cfg, int64_t seq_len, Device device);
// Peak FLOP/s of a device for MFU: `given_gflops` when > 0; else CPU = this machine's fp32 GEMM
// peak (measured once and cached, src/train/machine_peak.h); CUDA = a table of dense peaks by
// device name (0 if unknown): bf16 tensor cores, else fp32 on TF32 tensor cores when tf32, else
// fp32 on the CUDA cores.
double device_peak_flops(const std::string& device, bool bf16, bool tf32 = false,
                         double given_gflops = 0);

}  // namespace gdn::train
