// MQAR batches: each row is drawn by its own Philox stream (see mqar.h), so a row does not
// depend on the batch size's other rows, on threads or on the order steps are asked for.
#include "src/data/mqar.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/philox.h"
#include "src/core/error.h"

namespace gdn::data {

namespace {

// row counter = step * global_batch + global_row (with one rank: step * batch_size + row).
constexpr int kCounterBits = 62;

// The draws of one row: draw j is Philox(counter = j, key = the row's stream key).
class RowStream {
 public:
  explicit RowStream(uint64_t key) : key_(key) {}
  // Uniform in [0, n); the modulo bias is <= n / 2^64, negligible.
  int64_t below(int64_t n) {
    const kern::Philox4 r = kern::philox4x32(next_++, key_);
    const uint64_t bits = (uint64_t(r.x[0]) << 32) | r.x[1];
    return int64_t(bits % uint64_t(n));
  }

 private:
  uint64_t key_;
  uint64_t next_ = 0;
};

uint64_t row_key(uint64_t seed, int64_t step, int64_t global_row, int64_t global_batch) {
  const uint64_t counter = uint64_t(step) * uint64_t(global_batch) + uint64_t(global_row);
  const kern::Philox4 r = kern::philox4x32(counter, seed);
  return (uint64_t(r.x[0]) << 32) | r.x[1];
}

// The first `count` entries of `pool` become a uniform random sample without replacement
// (partial Fisher-Yates).
void partial_shuffle(std::vector<int64_t>& pool, int64_t count, RowStream& rng) {
  const int64_t n = int64_t(pool.size());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = i + rng.below(n - i);
    std::swap(pool[size_t(i)], pool[size_t(j)]);
  }
}

// Fills one row of inputs/targets (length T, already zero / -100).
void fill_row(const MqarOptions& o, RowStream& rng, int64_t* in, int64_t* tgt) {
  const int64_t n_keys = mqar_num_keys(o.vocab_size);
  const int64_t n_values = o.vocab_size - 1 - n_keys;
  const int64_t P = o.num_pairs, Q = o.num_queries;

  std::vector<int64_t> keys(static_cast<size_t>(n_keys)), values(static_cast<size_t>(n_values));
  std::iota(keys.begin(), keys.end(), int64_t(1));
  std::iota(values.begin(), values.end(), 1 + n_keys);
  partial_shuffle(keys, P, rng);
  partial_shuffle(values, P, rng);
  for (int64_t i = 0; i < P; ++i) {
    in[2 * i] = keys[size_t(i)];
    in[2 * i + 1] = values[size_t(i)];
  }

  // Queries: pair indices from consecutive permutations of [0, P).
  std::vector<int64_t> order(static_cast<size_t>(P));
  for (int64_t q = 0; q < Q; ++q) {
    if (q % P == 0) {
      std::iota(order.begin(), order.end(), int64_t(0));
      partial_shuffle(order, std::min(P, Q - q), rng);
    }
    const int64_t pair = order[size_t(q % P)];
    const int64_t pos = 2 * P + 2 * q;
    in[pos] = keys[size_t(pair)];
    in[pos + 1] = values[size_t(pair)];
    tgt[pos] = values[size_t(pair)];
  }
}

}  // namespace

int64_t mqar_num_keys(int64_t vocab_size) {
  return (vocab_size - 1) / 2;
}

void validate(const MqarOptions& o) {
  GDN_CHECK(o.vocab_size >= 5, "MQAR: vocab_size must be >= 5 (padding, 2 keys, 2 values), got ",
            o.vocab_size);
  const int64_t n_keys = mqar_num_keys(o.vocab_size);
  GDN_CHECK(o.num_pairs >= 1 && o.num_pairs <= n_keys, "MQAR: num_pairs must be in [1, ", n_keys,
            "] (the number of keys of vocab_size ", o.vocab_size, "), got ", o.num_pairs);
  GDN_CHECK(o.num_queries >= 1, "MQAR: num_queries must be >= 1, got ", o.num_queries);
  GDN_CHECK(o.seq_len >= 2 * (o.num_pairs + o.num_queries), "MQAR: seq_len ", o.seq_len,
            " is too short for ", o.num_pairs, " pairs and ", o.num_queries,
            " queries (needs >= 2 * (num_pairs + num_queries) = ",
            2 * (o.num_pairs + o.num_queries), ")");
  GDN_CHECK(o.batch_size >= 1, "MQAR: batch_size must be >= 1, got ", o.batch_size);
}

Batch mqar_batch(const MqarOptions& o, int64_t step, int rank, int world_size) {
  validate(o);
  GDN_CHECK(step >= 0, "MQAR: step must be >= 0, got ", step);
  GDN_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "MQAR: rank ", rank,
            " is outside [0, world_size = ", world_size, ")");
  const int64_t B = o.batch_size, T = o.seq_len, global_batch = B * world_size;
  GDN_CHECK(step <= int64_t((uint64_t(1) << kCounterBits) / uint64_t(global_batch)), "MQAR: step ",
            step, " x global batch ", global_batch, " exceeds 2^", kCounterBits, " rows");
  Batch b;
  b.step = step;
  b.inputs = Tensor::empty({B, T}, DType::int64);
  b.targets = Tensor::empty({B, T}, DType::int64);
  b.tokens = Tensor::empty({B, T + 1}, DType::int64);
  int64_t* in = b.inputs.data<int64_t>();
  int64_t* tgt = b.targets.data<int64_t>();
  int64_t* tok = b.tokens.data<int64_t>();
  std::fill(in, in + B * T, int64_t(0));
  std::fill(tgt, tgt + B * T, kMqarIgnore);
  b.starts.resize(size_t(B));
  for (int64_t r = 0; r < B; ++r) {
    const int64_t g = int64_t(rank) * B + r;  // the row's index in the global batch
    RowStream rng(row_key(o.seed, step, g, global_batch));
    fill_row(o, rng, in + r * T, tgt + r * T);
    std::copy(in + r * T, in + (r + 1) * T, tok + r * (T + 1));
    tok[r * (T + 1) + T] = 0;
    b.starts[size_t(r)] = step * global_batch + g;
  }
  return b;
}

MqarLoader::MqarLoader(const MqarOptions& options, int rank, int world_size)
    : options_(options), rank_(rank), world_size_(world_size) {
  validate(options_);
  GDN_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "MqarLoader: rank ", rank,
            " is outside [0, world_size = ", world_size, ")");
}

Batch MqarLoader::next() {
  Batch b = mqar_batch(options_, next_step_, rank_, world_size_);
  ++next_step_;
  return b;
}

void MqarLoader::set_state(const LoaderState& s) {
  GDN_CHECK(s.step >= 0, "MqarLoader: cannot restore step ", s.step);
  next_step_ = s.step;
}

double mqar_accuracy(const Tensor& logits, const Tensor& targets) {
  GDN_CHECK(logits.defined() && targets.defined(), "mqar_accuracy: undefined tensor");
  GDN_CHECK(logits.dim() >= 1 && is_floating(logits.dtype()),
            "mqar_accuracy: logits must be a float tensor [..., V], got ", logits.str());
  Shape lead(logits.shape().begin(), logits.shape().end() - 1);
  GDN_CHECK(targets.shape() == lead, "mqar_accuracy: targets ", shape_str(targets.shape()),
            " must have the leading shape of logits ", shape_str(logits.shape()));
  const int64_t V = logits.size(-1), N = targets.numel();
  GDN_CHECK(V >= 1, "mqar_accuracy: logits have an empty last dim: ", logits.str());
  const std::vector<double> z = logits.to_vector();  // to the CPU, fp64, contiguous
  const std::vector<double> t = targets.to_vector();
  int64_t scored = 0, correct = 0;
  for (int64_t i = 0; i < N; ++i) {
    const double target = t[size_t(i)];
    if (target == double(kMqarIgnore)) continue;
    GDN_CHECK(target >= 0 && target < double(V) && target == std::floor(target),
              "mqar_accuracy: target ", target, " at position ", i, " is outside [0, ", V, ")");
    const double* row = z.data() + i * V;
    // Strict > keeps the lowest id among ties.
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (row[v] > row[best]) best = v;
    ++scored;
    if (best == int64_t(target)) ++correct;
  }
  return scored > 0 ? double(correct) / double(scored) : 0.0;
}

}  // namespace gdn::data
