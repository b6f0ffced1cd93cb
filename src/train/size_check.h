// Sizing a run before it allocates anything: what one training step of a config needs (the
// model, its gradients and optimizer state, the activations of the first batch), first by formula
// (instant even for 1e8 layers or a batch of 1e9), then by one step profiled on the meta device.
// A run that cannot fit in the machine's memory (or the GPU's), or whose model the kernels cannot
// run, is refused with an error naming the keys that make it so.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/core/device.h"
#include "src/train/run_config.h"

namespace gdn::train {

// One training step of one rank, by formula, without building anything: a lower bound (in
// doubles, so absurd sizes do not overflow).
struct SizeEstimate {
  double params = 0;             // parameters of the model
  double state_bytes = 0;        // fp32 weights + optimizer state (this rank's share): always live
  double grad_bytes = 0;         // fp32 gradients
  double activation_bytes = 0;   // at least one [batch, seq, hidden] input per block + the tokens
  double host_object_bytes = 0;  // host memory of the module objects (any device, meta too)
  // The step's peak is at least the state plus the larger of the gradients (at the optimizer
  // step) and the saved activations (at the end of the forward).
  double device_bytes() const {
    return state_bytes + (grad_bytes > activation_bytes ? grad_bytes : activation_bytes);
  }
};
SizeEstimate estimate_step_size(const RunConfig& cfg, int64_t batch, int64_t seq,
                                int world_size = 1);

// The keys whose values make the step large, most to blame first, as "key=value"
// ("model.num_hidden_layers=100000000"): those whose reduction to a minimum shrinks the estimate
// by nearly as much as the one that shrinks it most.
std::vector<std::string> keys_that_size(const RunConfig& cfg, int64_t batch, int64_t seq,
                                        int world_size = 1);

// This machine's memory: the physical memory, or the cgroup's limit when lower.
int64_t host_memory_bytes();
// Memory one rank has on `dev`: a GPU's total memory; on the CPU, the host's shared among the
// ranks of this machine (Open MPI's / MPICH's local size; 1 outside mpirun). 0 for meta.
int64_t device_memory_bytes(Device dev);

// Refuses (gdn::Error naming cfg.source and the keys) a run that cannot run or fit on `dev`:
// head dims beyond the kernels' limits; a step whose formula lower bound exceeds the memory
// (fast, before any module is built); a step whose peak on meta (plus 1 GiB for the CUDA
// context on a GPU) exceeds it. The trainer calls it at setup, before it builds the data or
// the model: check_run_fits(cfg_, device_, world_size()).
void check_run_fits(const RunConfig& cfg, Device dev, int world_size = 1);

// Refuses a config whose model the kernels cannot run (head dims), naming the keys.
void check_kernel_limits(const RunConfig& cfg);

// Refuses a step that cannot even be profiled on meta: its module objects alone would exceed the
// host's memory, or its byte counts the allocator's 64-bit range (gdn profile-memory calls it
// before profiling).
void check_profilable(const RunConfig& cfg, int64_t batch, int64_t seq, int world_size = 1);

// Bytes as format_bytes writes them, also beyond int64 ("1.2e+06 TiB").
std::string format_bytes_estimate(double bytes);

}  // namespace gdn::train
