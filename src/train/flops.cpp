// FLOP counts.
#include "src/train/flops.h"

#include <chrono>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "layers/token_mixer.h"

namespace gdn::train {

double train_flops_per_token(const nn::ModelConfig& c, int64_t seq_len) {
  const double d = double(c.hidden_size);
  const double mlp = 6.0 * 3 * d * double(c.mlp_intermediate_size());
  double layers = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layers += nn::token_mixer_of(c, i).train_flops_per_token(c, i, seq_len) + mlp;
  const double head = 6.0 * d * double(c.vocab_size);
  return layers + head;
}

double device_peak_flops(const std::string& device, bool bf16, bool tf32) {
  if (device.rfind("cpu", 0) == 0) {
    static double cpu_peak = [] {
      const int64_t n = 512;
      std::vector<float> a(size_t(n * n), 1.0f), b(size_t(n * n), 0.5f), c(size_t(n * n));
      double best = 1e30;
      for (int r = 0; r < 5; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        cpu::gemm<float>(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return 2.0 * double(n) * double(n) * double(n) / best;
    }();
    return cpu_peak;
  }
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
