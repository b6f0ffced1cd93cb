// The memory profile of one training step (forward, backward, optimizer step) through the
// trainer's own code: bytes per category (param, grad, optim, activation, temp, workspace) at
// the overall peak and at each category's own high-water mark, when the peak happens, and the
// saved activations per block and per op kind. On the meta device it needs no memory and no
// arithmetic, so a 1.3B model at 8K context profiles in seconds on any machine.
#pragma once
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/core/allocator.h"
#include "src/core/tensor.h"
#include "src/train/memory_timeline.h"
#include "src/train/run_config.h"

namespace gdn::train {

// Orders "model.layers.10" after "model.layers.9" (digits compared as numbers).
struct NaturalLess {
  bool operator()(const std::string& a, const std::string& b) const;
};

struct MemoryProfile {
  std::string device;
  int64_t params = 0, batch = 0, seq = 0;
  int64_t world_size = 1;  // data-parallel ranks: the profile is of one rank (rank 0)
  bool zero1 = false;      // optimizer state sharded (dist.zero1 with world_size > 1)
  std::string dtype, checkpointing;
  // "documents" (text with data.pack: documents: the rows run as one packed row, and each row
  // holds one document boundary) or "stream".
  std::string packing = "stream";
  int64_t peak_bytes = 0;
  std::string peak_phase;  // setup | forward | backward | optimizer
  std::array<int64_t, kNumMemCategories> peak_by_category{};  // at the overall peak
  std::array<int64_t, kNumMemCategories> max_by_category{};   // each category's own maximum
  std::vector<std::pair<std::string, int64_t>> phase_peaks;   // peak reached in each phase
  std::vector<std::pair<std::string, int64_t>> phase_allocs;  // allocator calls in each phase
  int64_t step_allocs = 0;  // allocator calls in one step (forward, backward and optimizer)
  int64_t saved_total = 0;
  std::map<std::string, int64_t, NaturalLess> saved_by_block;  // "model.layers.0", "head", ...
  std::map<std::string, int64_t> saved_by_kind;  // projections, short_convs, kernel, ...
  int64_t allowance_bytes = 0;  // CUDA context and library workspaces, added for budgets
  int64_t budget_bytes = 0;     // 0: none given
  // One point per op of the step (setup included), when recorded (profile_training_step's
  // record_timeline); its highest total is peak_bytes.
  std::vector<TimelinePoint> timeline;
  bool fits() const { return peak_bytes + allowance_bytes <= budget_bytes; }
};

// Runs one step of cfg's model at [batch, seq] on `device` (meta, cpu or cuda) with random
// tokens; packed as the trainer packs (packed_profile_cu_seqlens) for text with data.pack:
// documents. The allocator peaks are reset first; everything is freed after. world_size > 1: one
// rank of a data-parallel run (batch per rank): gradients in all-reduce buckets allocated up
// front, and with dist.zero1 only rank 0's shard of the optimizer state (about 1/world_size).
// record_timeline: also the timeline of the step, op by op (`gdn profile-memory`; off elsewhere).
MemoryProfile profile_training_step(const RunConfig& cfg, const std::string& device, int64_t batch,
                                    int64_t seq, int world_size = 1, bool record_timeline = false);

// The boundaries a packed profile assumes: the batch as one row of batch * seq positions, each
// row of seq holding one document boundary off the chunk grid (two sequences per row, so the
// kernels keep one chunk state more per row than unpacked). Rows of many short documents keep
// more: one state per chunk each document starts.
std::vector<int64_t> packed_profile_cu_seqlens(int64_t batch, int64_t seq);

nlohmann::json profile_json(const MemoryProfile& p);
std::string profile_table(const MemoryProfile& p);

// Settings that would fit `budget` (allowance included), each with its predicted peak (meta).
struct FitSuggestion {
  std::string settings;  // "train.dtype=bfloat16 train.checkpointing=block train.batch_size=4"
  int64_t peak_bytes = 0;
  bool fits = false;
};
// Tries bf16 and checkpointing at the batch and at halved batches down to 1 (the sequence is
// kept), stopping at the largest batch where something fits; every setting profiled is returned
// (batches whose formula lower bound is already over budget are skipped, batch 1 never).
std::vector<FitSuggestion> suggest_fits(const RunConfig& cfg, int64_t batch, int64_t seq,
                                        int64_t budget, int64_t allowance, int world_size = 1);
// The report of suggest_fits against `current` (the profile with its budget and allowance):
// "settings that would fit" with one line each, or, when none does, "nothing fits within
// BUDGET: the smallest predicted peak is X + allowance Y = Z (settings)", the configured
// setting included.
std::string fit_report(const std::vector<FitSuggestion>& suggestions, const MemoryProfile& current);

// Adds the saved activations of the graph behind `loss` (each storage once) to prof's totals,
// per block and per op kind.
void add_saved_activations(const Tensor& loss, MemoryProfile& prof);

// "24GiB", "24GB", "512MiB", "1.5 TB", "1e9B" -> bytes. The unit is required (B, KB, KiB, MB,
// MiB, GB, GiB, TB, TiB; any case): errors name `what` (e.g. "--budget").
int64_t parse_bytes(const std::string& s, const std::string& what = "size");

}  // namespace gdn::train
