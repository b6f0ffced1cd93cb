// Data-parallel gradient averaging with communication overlapped with the backward pass.
//
// The parameters are grouped into buckets of at most dist.bucket_mb, in reverse model order
// (the backward finishes the last layers first). Each bucket owns one flat buffer, and every
// parameter's .grad is a view into it (zeroed at the start of a step), so backward accumulates
// straight into the buffers: no copies, and no more gradient memory than one process needs.
// During the last backward of a step, the engine's gradient-ready hooks mark parameters final;
// a bucket whose parameters are all final starts its all-reduce (avg) at once, while backward
// continues. Buckets start strictly in index order, so every rank issues the same collectives
// in the same order whatever the timing. finish() starts what is left and waits for all.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "src/autograd/hooks.h"
#include "src/dist/communicator.h"

namespace gdn::dist {

// Parameter indices per bucket: reverse order, greedy, each bucket at most cap_bytes (a
// parameter larger than the cap gets a bucket of its own); cap_bytes 0: one bucket per
// parameter. Every index appears exactly once.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<int64_t>& param_bytes,
                                                int64_t cap_bytes);

class GradReducer {
 public:
  // params: float tensors of one dtype, on comm's device (or meta, for memory profiles).
  GradReducer(std::vector<Tensor> params, std::shared_ptr<Communicator> comm, int64_t bucket_bytes);
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Start of a step (instead of Optimizer::zero_grad): every grad is its zeroed bucket view.
  void zero_grads();
  // The next backward is the step's last: its hooks start the bucket all-reduces.
  void arm();
  // Starts the buckets not started yet, waits for all (timeout: an error naming the bucket);
  // afterwards every grad holds the mean over ranks, identical on every rank.
  void finish();

  const std::vector<std::vector<size_t>>& buckets() const { return plan_; }
  int64_t bucket_bytes_total() const;
  // Of the last step: seconds spent in communication calls (starting, progressing, waiting),
  // and the part of it spent blocked in finish() after backward (not overlapped).
  double comm_seconds() const { return comm_s_; }
  double wait_seconds() const { return wait_s_; }
  // Buckets already started when backward ended (overlap achieved), of the last step.
  int started_during_backward() const { return started_in_backward_; }

 private:
  struct Bucket {
    Tensor flat;
    std::vector<size_t> params;
    std::vector<Tensor> views;  // views[i] is the grad of params[i]
    int pending = 0;            // parameters not yet final
    std::unique_ptr<Work> work;
  };
  void on_ready(size_t param);
  void start_ready_buckets();
  void start(size_t bucket);
  void poll();

  std::vector<Tensor> params_;
  std::shared_ptr<Communicator> comm_;
  std::vector<std::vector<size_t>> plan_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<uint8_t> ready_;
  std::vector<autograd::GradReadyHookHandle> hooks_;
  size_t next_start_ = 0;
  bool armed_ = false;
  double comm_s_ = 0, wait_s_ = 0;
  int started_in_backward_ = 0;
};

}  // namespace gdn::dist
