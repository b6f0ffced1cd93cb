// MQAR (multi-query associative recall; Arora et al., Zoology, 2023; used by the Gated DeltaNet
// paper): a synthetic task where a sequence shows key-value pairs and then queries some keys;
// the model must recall each queried key's value. A cheap probe of a layer's recall capacity.
//
// Vocabulary (vocab_size V, n_keys = (V - 1) / 2):
//   0                       padding
//   [1, 1 + n_keys)         keys
//   [1 + n_keys, V)         values (V - 1 - n_keys >= n_keys of them)
// A row of seq_len T tokens:
//   k1 v1 k2 v2 ... kP vP   P distinct keys, each with its own value (values are distinct too,
//                           as in Zoology's generator)
//   q1 w1 ... qQ wQ         Q queries of shown keys, each followed by its value: the keys are
//                           consecutive random permutations of the P keys (so with Q <= P no
//                           key is queried twice, and beyond that each is queried evenly)
//   0 ... 0                 padding up to T
// targets[t] = the value at the position of each query key, -100 (ignored) everywhere else: the
// loss and mqar_accuracy() score recall only, never the unpredictable pairs themselves.
//
// Batch fields (src/data/loader.h), all CPU int64:
//   inputs  [B, T]      the row above
//   targets [B, T]      -100 except at the Q query-key positions
//   tokens  [B, T + 1]  inputs followed by one padding token, so tokens[:, :T] == inputs and
//                       tokens[:, 1:] is the *unmasked* next-token sequence; train on targets
//   starts  [B]         the global index of each row: step * W * B + r * B + row
//
// Determinism: row i of step s on rank r of W is global row g = r * B + i of a global batch of
// W * B rows, a pure function of (seed, s, g). Its stream key is Philox(counter = s * W * B + g,
// key = seed) and its j-th draw is Philox(counter = j, key = stream key): as with DataLoader, W
// ranks of batch B draw exactly the rows of one process of batch W * B.
#pragma once
#include <cstdint>

#include "src/core/tensor.h"
#include "src/data/loader.h"

namespace gdn::data {

struct MqarOptions {
  int64_t vocab_size = 8192;
  int64_t seq_len = 256;
  int64_t num_pairs = 32;    // P
  int64_t num_queries = 32;  // Q
  int64_t batch_size = 1;
  uint64_t seed = 0;
};

constexpr int64_t kMqarIgnore = -100;  // the target of every position that is not a query

// (vocab_size - 1) / 2: the keys are [1, 1 + n), the values [1 + n, vocab_size).
int64_t mqar_num_keys(int64_t vocab_size);
// Throws naming the offending values: vocab_size >= 5, seq_len >= 2 (P + Q), 1 <= P <= n_keys,
// Q >= 1, batch_size >= 1.
void validate(const MqarOptions& options);

// The batch of `step` on `rank` of `world_size` (the layout above; batch_size is per rank).
Batch mqar_batch(const MqarOptions& options, int64_t step, int rank = 0, int world_size = 1);

// Steps through mqar_batch like DataLoader through a shard (no worker thread: a batch is cheap).
class MqarLoader {
 public:
  explicit MqarLoader(const MqarOptions& options, int rank = 0, int world_size = 1);
  // The batch of step state().step, then advances.
  Batch next();
  Batch batch_at(int64_t step) const { return mqar_batch(options_, step, rank_, world_size_); }
  LoaderState state() const { return {next_step_}; }
  void set_state(const LoaderState& s);
  const MqarOptions& options() const { return options_; }
  int rank() const { return rank_; }

 private:
  MqarOptions options_;
  int rank_ = 0, world_size_ = 1;
  int64_t next_step_ = 0;
};

// Fraction of the positions with target != -100 whose argmax over the last dim of `logits`
// (ties: the lowest id) equals the target. logits [..., V] of any float dtype and device,
// targets of the same leading shape, integer or float. 0 when no position is scored.
double mqar_accuracy(const Tensor& logits, const Tensor& targets);

}  // namespace gdn::data
