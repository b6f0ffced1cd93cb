// Refusing runs that cannot fit, before they allocate.
#include "src/train/size_check.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <stdexcept>

#include "kernels/gated_delta_rule.h"
#include "layers/token_mixer.h"
#include "src/core/error.h"
#include "src/train/memory_profile.h"
#if defined(GDN_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace gdn::train {

namespace {

// Host memory per block while a step runs, any device: its module objects and its part of the
// autograd graph. Measured: about 72 KB per block of configs/default.yaml's model on meta
// (`gdn profile-memory` at 1000 to 30000 layers); a little less here, as a lower bound. It makes
// 1e8 layers fail at once whatever the hidden size.
constexpr double kHostBytesPerLayer = 64 * 1024;
// The largest step gdn profile-memory profiles (by its formula lower bound): 16 TiB.
constexpr double kProfilableBytes = 16.0 * 1099511627776.0;
// The CUDA context and cuBLAS/cuDNN workspaces (gdn profile-memory's default allowance).
constexpr int64_t kCudaAllowance = int64_t(1) << 30;

// Every size the int64 formulas of the model multiply stays far from overflow.
bool sane_model_sizes(const nn::ModelConfig& m) {
  const double limit = double(1 << 24);
  const double dims[] = {double(m.hidden_size),
                         double(m.num_heads) * double(m.head_dim),
                         double(m.v_heads()) * double(m.head_dim) * m.expand_v,
                         double(m.conv_size),
                         double(m.hidden_ratio),
                         double(m.intermediate_size),
                         double(m.v_heads())};
  for (double d : dims)
    if (!(d >= 0 && d <= limit)) return false;
  return true;
}

// Parameters of block `layer` (token mixer + MLP + two norms).
double layer_params(const nn::ModelConfig& m, int64_t layer) {
  const double d = double(m.hidden_size);
  if (sane_model_sizes(m) && m.num_heads > 0 && m.head_dim > 0)
    return double(nn::token_mixer_of(m, layer).num_parameters(m, layer)) +
           3.0 * d * double(m.mlp_intermediate_size()) + 2.0 * d;
  // Absurd sizes: the q, k, v and o projections alone (a lower bound of any mixer's).
  const double kd = double(m.num_heads) * double(m.head_dim);
  const double vd = double(m.v_heads()) * double(m.head_dim) * m.expand_v;
  return d * (2.0 * kd + vd) + vd * d + 2.0 * d;
}

// Optimizer state per parameter, in bytes.
double optimizer_bytes_per_param(const TrainConfig& t) {
  if (t.optimizer == OptimizerKind::adamw) return 8;  // two fp32 moments
  return t.momentum > 0 ? 4 : 0;                      // SGD's momentum buffer
}

// "model.num_hidden_layers=100000000", written as the config would have it.
struct Knob {
  const char* key;
  std::function<std::string(const RunConfig&, int64_t, int64_t)> value;
  std::function<void(RunConfig&, int64_t&, int64_t&)> minimize;
};

const std::vector<Knob>& knobs() {
  using R = RunConfig;
  static const std::vector<Knob> k = {
      {"model.num_hidden_layers",
       [](const R& c, int64_t, int64_t) { return std::to_string(c.model.num_hidden_layers); },
       [](R& c, int64_t&, int64_t&) { c.model.num_hidden_layers = 1; }},
      {"model.hidden_size",
       [](const R& c, int64_t, int64_t) { return std::to_string(c.model.hidden_size); },
       [](R& c, int64_t&, int64_t&) { c.model.hidden_size = 1; }},
      {"model.vocab_size",
       [](const R& c, int64_t, int64_t) { return std::to_string(c.model.vocab_size); },
       [](R& c, int64_t&, int64_t&) { c.model.vocab_size = 1; }},
      {"model.num_heads",
       [](const R& c, int64_t, int64_t) { return std::to_string(c.model.num_heads); },
       [](R& c, int64_t&, int64_t&) {
         // The value heads are a multiple of the key heads: keep their ratio.
         if (c.model.num_v_heads > 0 && c.model.num_heads > 0)
           c.model.num_v_heads = std::max<int64_t>(1, c.model.num_v_heads / c.model.num_heads);
         c.model.num_heads = 1;
       }},
      {"model.num_v_heads",
       [](const R& c, int64_t, int64_t) { return std::to_string(c.model.num_v_heads); },
       [](R& c, int64_t&, int64_t&) { c.model.num_v_heads = 0; }},
      {"model.head_dim",
       [](const R& c, int64_t, int64_t) { return std::to_string(c.model.head_dim); },
       [](R& c, int64_t&, int64_t&) { c.model.head_dim = 1; }},
      {"model.intermediate_size",
       [](const R& c, int64_t, int64_t) { return std::to_string(c.model.intermediate_size); },
       [](R& c, int64_t&, int64_t&) {
         if (c.model.intermediate_size > 0) c.model.intermediate_size = 1;
       }},
      {"model.hidden_ratio",
       [](const R& c, int64_t, int64_t) { return std::to_string(c.model.hidden_ratio); },
       [](R& c, int64_t&, int64_t&) {
         if (c.model.intermediate_size <= 0) c.model.hidden_ratio = 0;
       }},
      {"train.batch_size", [](const R&, int64_t b, int64_t) { return std::to_string(b); },
       [](R&, int64_t& b, int64_t&) { b = 1; }},
      {"data.seq_len", [](const R&, int64_t, int64_t t) { return std::to_string(t); },
       [](R&, int64_t&, int64_t& t) { t = 1; }},
  };
  return k;
}

// "3.2M", "1.3B", "1.05e+14".
std::string format_count(double n) {
  char buf[32];
  if (n < 1e3)
    std::snprintf(buf, sizeof buf, "%.0f", n);
  else if (n < 1e6)
    std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  else if (n < 1e9)
    std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else if (n < 1e12)
    std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.3g", n);
  return buf;
}

// Memory of `dev` in words: "this machine's memory (23.4 GiB)", "cuda:0's memory (139.8 GiB)".
std::string memory_name(Device dev, int64_t bytes) {
  if (dev.is_cuda()) return str_cat(dev.str(), "'s memory (", format_bytes(bytes), ")");
  return str_cat("this machine's memory (", format_bytes(bytes), ")");
}

[[noreturn]] void refuse(const RunConfig& cfg, int64_t batch, int64_t seq, int world_size,
                         const std::string& what, const SizeEstimate& e) {
  const std::vector<std::string> keys = keys_that_size(cfg, batch, seq, world_size);
  std::string blame;
  for (const auto& k : keys) blame += (blame.empty() ? "" : ", ") + k;
  GDN_FAIL(cfg.source.empty() ? "the config" : cfg.source, ": this run cannot fit: ", what,
           ". The weights and optimizer state take at least ", format_bytes_estimate(e.state_bytes),
           " and the gradients ", format_bytes_estimate(e.grad_bytes), " (", format_count(e.params),
           " parameters); the activations of one batch (", batch, " x ", seq, " tokens) at least ",
           format_bytes_estimate(e.activation_bytes), ". The keys that make it so: ", blame,
           ". Lower them; `gdn profile-memory CONFIG.yaml --budget SIZE` lists settings that fit "
           "a budget (bf16, checkpointing, smaller batches)");
}

int64_t local_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(name);
    if (v && std::atoi(v) > 0) return std::atoi(v);
  }
  return 1;
}

}  // namespace

std::string format_bytes_estimate(double bytes) {
  const double tib = 1099511627776.0;
  if (std::isfinite(bytes) && std::fabs(bytes) < tib) return format_bytes(int64_t(bytes));
  char buf[64];
  std::snprintf(buf, sizeof buf, std::fabs(bytes) < 1e6 * tib ? "%.2f TiB" : "%.3g TiB",
                bytes / tib);
  return buf;
}

SizeEstimate estimate_step_size(const RunConfig& cfg, int64_t batch, int64_t seq, int world_size) {
  const nn::ModelConfig& m = cfg.model;
  SizeEstimate e;
  const double d = double(m.hidden_size), layers = double(m.num_hidden_layers);
  const double emb = double(m.vocab_size) * d;
  // The layers a mixer claims (listed in the config) each by its own formula; the model's own
  // mixer's blocks, all the others, by one (their count may be absurd).
  double claimed = 0, claimed_params = 0;
  for (const nn::TokenMixerType& t : nn::token_mixer_types())
    if (t.claimed_layers)
      for (int64_t l : t.claimed_layers(m)) {
        claimed += 1;
        claimed_params += layer_params(m, l);
      }
  // (layer -1 is claimed by no mixer: a block of the model's own mixer)
  const double own_params = layers > claimed ? (layers - claimed) * layer_params(m, -1) : 0;
  e.params = emb * (m.tie_word_embeddings ? 1.0 : 2.0) + d + own_params + claimed_params;
  // ZeRO-1 keeps 1/N of the optimizer state per rank (at least).
  const double optim_share = cfg.dist.zero1 && world_size > 1 ? 1.0 / world_size : 1.0;
  e.state_bytes = e.params * (4.0 + optimizer_bytes_per_param(cfg.train) * optim_share);
  e.grad_bytes = e.params * 4.0;
  // Whatever the checkpointing, each block keeps at least its input for backward, and the
  // batch's ids and targets (int64) are on the device.
  const double tokens = double(batch) * double(seq);
  e.activation_bytes =
      layers * tokens * d * double(dtype_size(cfg.train.dtype)) + 2.0 * tokens * 8.0;
  e.host_object_bytes = layers * kHostBytesPerLayer;
  return e;
}

std::vector<std::string> keys_that_size(const RunConfig& cfg, int64_t batch, int64_t seq,
                                        int world_size) {
  auto total = [&](const RunConfig& c, int64_t b, int64_t t) {
    const SizeEstimate e = estimate_step_size(c, b, t, world_size);
    return e.device_bytes() + e.host_object_bytes;
  };
  const double all = total(cfg, batch, seq);
  std::vector<std::pair<double, std::string>> blamed;  // (log of the shrink factor, key=value)
  for (const Knob& k : knobs()) {
    RunConfig c = cfg;
    int64_t b = batch, t = seq;
    k.minimize(c, b, t);
    const double rest = total(c, b, t);
    if (!(rest > 0) || !(all > rest)) continue;
    blamed.emplace_back(std::log(all / rest), str_cat(k.key, "=", k.value(cfg, batch, seq)));
  }
  std::sort(blamed.begin(), blamed.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (const auto& [f, kv] : blamed)
    if (out.empty() || (f >= 0.75 * blamed[0].first && out.size() < 3)) out.push_back(kv);
  return out;
}

int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : 0;
  // A container's limit (cgroup v2, then v1); "max" or an absurd v1 value means none.
  for (const char* f :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(f);
    long long limit = 0;
    if (in >> limit && limit > 0 && (bytes == 0 || limit < bytes)) bytes = int64_t(limit);
  }
  return bytes;
}

int64_t device_memory_bytes(Device dev) {
  if (dev.is_meta()) return 0;
#if defined(GDN_WITH_CUDA)
  if (dev.is_cuda()) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, dev.index) != cudaSuccess) {
      cudaGetLastError();  // leave no sticky error for the next CUDA call
      return 0;
    }
    return int64_t(prop.totalGlobalMem);
  }
#endif
  if (dev.is_cuda()) return 0;
  return host_memory_bytes() / local_ranks();
}

void check_kernel_limits(const RunConfig& cfg) {
  const nn::ModelConfig& m = cfg.model;
  gdr::Problem p;
  p.H = m.num_heads;
  p.HV = m.v_heads();
  p.K = m.head_dim;
  p.V = m.head_v_dim();
  p.chunk = int(m.kernel_chunk(Device::meta()));  // 0 (the device's) is valid on every device
  p.scale = 1.0;
  p.impl = m.kernel;
  p.residual = m.residual;
  try {
    gdr::validate(p);
  } catch (const std::invalid_argument& e) {
    GDN_FAIL(cfg.source.empty() ? "the config" : cfg.source,
             ": the model's heads cannot run on the gated-delta-rule kernels: ", e.what(),
             " (model.head_dim=", m.head_dim, ", model.expand_v=", m.expand_v,
             " give key heads of ", p.K, " and value heads of ", p.V, ")");
  }
}

void check_profilable(const RunConfig& cfg, int64_t batch, int64_t seq, int world_size) {
  const SizeEstimate e = estimate_step_size(cfg, batch, seq, world_size);
  const int64_t host = host_memory_bytes();
  if (host > 0 && e.host_object_bytes > double(host))
    refuse(cfg, batch, seq, world_size,
           str_cat("building its ", cfg.model.num_hidden_layers, " blocks, even on meta, takes ",
                   "about ", format_bytes_estimate(e.host_object_bytes),
                   " of host memory, more than ", memory_name(Device::cpu(), host)),
           e);
  // More than any one machine holds is not worth profiling (the loss alone would take minutes
  // on meta: one 32 MiB chunk of logits at a time).
  if (!(e.device_bytes() < kProfilableBytes))
    refuse(cfg, batch, seq, world_size,
           str_cat("one step needs at least ", format_bytes_estimate(e.device_bytes()),
                   ", more than any one machine holds (", format_bytes_estimate(kProfilableBytes),
                   "); not profiled"),
           e);
}

void check_run_fits(const RunConfig& cfg, Device dev, int world_size) {
  check_kernel_limits(cfg);
  if (dev.is_meta()) return;
  const int64_t batch = cfg.train.batch_size, seq = cfg.data.seq_len;
  const SizeEstimate e = estimate_step_size(cfg, batch, seq, world_size);
  const int64_t host = dev.is_cuda() ? host_memory_bytes() : device_memory_bytes(dev);
  const int64_t mem = device_memory_bytes(dev);
  // 1. By formula: no module is built, so 1e8 layers or a batch of 1e9 are refused at once.
  const double host_need = e.host_object_bytes + (dev.is_cuda() ? 0.0 : e.device_bytes());
  if (host > 0 && host_need > double(host))
    refuse(cfg, batch, seq, world_size,
           str_cat("it needs at least ", format_bytes_estimate(host_need), ", more than ",
                   memory_name(Device::cpu(), host)),
           e);
  if (dev.is_cuda() && mem > 0 && e.device_bytes() > double(mem))
    refuse(cfg, batch, seq, world_size,
           str_cat("it needs at least ", format_bytes_estimate(e.device_bytes()), ", more than ",
                   memory_name(dev, mem)),
           e);
  if (mem <= 0) return;  // unknown memory: nothing more to compare with
  // 2. One step on meta: the exact peak the run will reach (the trainer's own code), with the
  // kernels' chunk of the run's device.
  RunConfig on_dev = cfg;
  on_dev.model.chunk_size = cfg.model.kernel_chunk(dev);
  const MemoryProfile p = profile_training_step(on_dev, "meta", batch, seq, world_size);
  const int64_t allowance = dev.is_cuda() ? kCudaAllowance : 0;
  const double need =
      double(p.peak_bytes + allowance) + (dev.is_cuda() ? 0.0 : e.host_object_bytes);
  if (need > double(mem))
    refuse(cfg, batch, seq, world_size,
           str_cat("one training step peaks at ", format_bytes(p.peak_bytes),
                   dev.is_cuda() ? str_cat(" + ", format_bytes(allowance), " for the CUDA context")
                                 : std::string(),
                   " (predicted on meta, during ", p.peak_phase, "), more than ",
                   memory_name(dev, mem)),
           e);
}

}  // namespace gdn::train
