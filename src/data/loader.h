// Batches of token windows from a shard, as CPU int32/int64 tensors.
//
// DataLoader (training): each row of step s is a window of seq_len + 1 tokens at a random start.
// With W ranks of batch_size B, row i of rank r is global row g = r * B + i of a global batch of
// W * B rows, and its start is a pure function of (seed, step, g): Philox with key = seed and
// counter = s * W * B + g. Hence
//   - the order is deterministic and resumable from the step alone (state() / set_state());
//   - W ranks of batch B read exactly the rows of one process of batch W * B (rank r gets rows
//     [r * B, (r + 1) * B) of it), so data-parallel runs see the same data as a single process,
//     and a run resumes with another world size at the same global batch exactly; ranks draw
//     disjoint counters, i.e. independent windows (sampled with replacement, so two ranks can
//     still pick overlapping text);
//   - prefetching (a worker thread that prepares up to `prefetch_depth` batches ahead) cannot
//     change what a step returns.
// SequentialLoader (evaluation): non-overlapping windows covering the shard in order: window j
// has inputs tokens[j*T, (j+1)*T) and targets one token later; rank r takes windows r, r + W,
// r + 2W, ... (W = world size) and batches them in order, the last batch possibly smaller.
// Packing (LoaderOptions::pack_eos >= 0, src/data/packing.h): the rows are whole documents
// instead of windows. Training draws global row index i = step * W * B + g of the rows in the
// seeded order of permuted_row (every row once per epoch), still a pure function of (seed,
// step, g); validation takes the rows in layout order, as windows above.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "src/core/tensor.h"
#include "src/data/packing.h"
#include "src/data/shard.h"

namespace gdn::data {

struct Batch {
  int64_t step = 0;             // DataLoader: the training step; SequentialLoader: the batch index
  Tensor tokens;                // [B, T + 1]
  Tensor inputs;                // [B, T]  = tokens[:, :T] (contiguous copy)
  Tensor targets;               // [B, T]  = tokens[:, 1:] (contiguous copy); -100 where the
                                // shard's loss mask leaves the target unscored
  std::vector<int64_t> starts;  // shard offset of each row's first token
  // Packed documents (src/data/packing.h): fla's cu_seqlens over the B * T inputs flattened
  // into one row, covering every row and document; the targets across a boundary are -100.
  // Empty: each row is one sequence.
  std::vector<int64_t> cu_seqlens;
  int64_t batch_size() const { return int64_t(starts.size()); }
};

struct LoaderOptions {
  int64_t batch_size = 1;
  int64_t seq_len = 0;  // T: each row holds T + 1 tokens
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  bool prefetch = true;        // prepare batches on a worker thread
  int prefetch_depth = 2;      // batches ready ahead of the trainer (1 or 2 is plenty)
  DType dtype = DType::int32;  // int32 or int64
  int32_t pack_eos = -1;       // >= 0: pack whole documents ending in this token; -1: windows
};

// The position of a DataLoader: the step its next() returns.
struct LoaderState {
  int64_t step = 0;
};

// Shard offset of global row `global_row` (in [0, global_batch)) of `step`: the pure function
// above; num_starts = tokens - T.
int64_t window_start(uint64_t seed, int64_t step, int64_t global_row, int64_t global_batch,
                     int64_t num_starts);

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Shard> shard, const LoaderOptions& options);
  ~DataLoader();  // stops and joins the worker
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The batch of step state().step, then advances. Rethrows an error of the worker.
  Batch next();
  // The batch of any step, without touching the state (what next() returns for that step).
  Batch batch_at(int64_t step) const;
  LoaderState state() const;
  // Continues from s.step: drops prefetched batches, so the next next() is batch_at(s.step).
  void set_state(const LoaderState& s);
  const LoaderOptions& options() const { return options_; }
  const Shard& shard() const { return *shard_; }
  // The document layout when packing (null otherwise).
  const PackedRows* packed() const { return packed_.get(); }

 private:
  void start_worker();
  void stop_worker();
  void worker_loop();

  std::shared_ptr<const Shard> shard_;
  LoaderOptions options_;
  int64_t num_starts_ = 0;
  std::shared_ptr<const PackedRows> packed_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread worker_;
  std::deque<Batch> ready_;   // prefetched batches, steps next_step_, next_step_ + 1, ...
  std::exception_ptr error_;  // set by the worker; rethrown once ready_ runs dry
  int64_t next_step_ = 0;     // the step next() returns
  int64_t produce_step_ = 0;  // the step the worker makes next
  bool stop_ = false;
};

class SequentialLoader {
 public:
  // max_batches 0: every window of this rank.
  // pack_eos >= 0: rows of whole documents ending in that token (LoaderOptions::pack_eos).
  SequentialLoader(std::shared_ptr<const Shard> shard, int64_t batch_size, int64_t seq_len,
                   int64_t max_batches = 0, int rank = 0, int world_size = 1,
                   DType dtype = DType::int32, int32_t pack_eos = -1);
  const PackedRows* packed() const { return packed_.get(); }
  int64_t num_windows() const { return num_windows_; }  // on this rank, before max_batches
  int64_t num_batches() const { return num_batches_; }
  // Fills `out` with the next batch; false once all num_batches() were returned.
  bool next(Batch& out);
  void reset() { next_batch_ = 0; }

 private:
  std::shared_ptr<const Shard> shard_;
  int64_t batch_size_, seq_len_;
  int rank_, world_size_;
  DType dtype_;
  std::shared_ptr<const PackedRows> packed_;
  int64_t num_windows_ = 0, num_batches_ = 0, next_batch_ = 0;
};

}  // namespace gdn::data
