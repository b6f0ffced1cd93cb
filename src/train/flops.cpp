// FLOP counts.
#include "src/train/flops.h"

#include "layers/token_mixer.h"
#include "src/train/machine_peak.h"

namespace gdn::train {

double train_flops_per_token(const nn::ModelConfig& cfg, int64_t seq_len, Device device) {
  nn::ModelConfig c = cfg;
  c.chunk_size = c.kernel_chunk(device);
  const double d = double(c.hidden_size);
  const double mlp = 6.0 * 3 * d * double(c.mlp_intermediate_size());
  double layers = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layers += nn::token_mixer_of(c, i).train_flops_per_token(c, i, seq_len) + mlp;
  const double head = 6.0 * d * double(c.vocab_size);
  return layers + head;
}

double device_peak_flops(const std::string& device, bool bf16, bool tf32, double given_gflops) {
  if (given_gflops > 0) return given_gflops * 1e9;
  if (device.rfind("cpu", 0) == 0) return cpu_peak().gflops * 1e9;
  // Dense tensor-core peaks (no sparsity), FLOP/s; fp32 without TF32 is the CUDA-core peak.
  struct Peak {
    const char* name;
    double bf16, tf32, fp32;
  };
  static const Peak table[] = {
      {"H200", 989e12, 494.7e12, 67e12},      {"H100", 989e12, 494.7e12, 67e12},
      {"A100", 312e12, 156e12, 19.5e12},      {"RTX 3090", 71e12, 35.6e12, 35.6e12},
      {"RTX 4090", 165e12, 82.6e12, 82.6e12}, {"L40S", 362e12, 183e12, 91.6e12}};
  for (const auto& p : table)
    if (device.find(p.name) != std::string::npos) return bf16 ? p.bf16 : tf32 ? p.tf32 : p.fp32;
  return 0;
}

}  // namespace gdn::train
