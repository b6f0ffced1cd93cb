// DataLoader and SequentialLoader. Batches are built by one function (make_batch) from a list of
// window starts, so the random and sequential modes, with or without prefetch, share the same
// copy and validation code.
#include "src/data/loader.h"

#include <algorithm>

#include "kernels/philox.h"
#include "src/core/error.h"

namespace gdn::data {

namespace {

// counter = step * global_batch + global_row; with one rank this is the former
// step * batch_size + row, so single-process data orders are unchanged.
constexpr int kCounterBits = 62;

template <typename T>
void fill_rows(const Shard& shard, const std::vector<int64_t>& starts, int64_t seq_len, Batch& b) {
  const int64_t rows = int64_t(starts.size()), width = seq_len + 1;
  std::vector<int32_t> window(static_cast<size_t>(width)), scored;
  T* tok = b.tokens.data<T>();
  T* in = b.inputs.data<T>();
  T* tgt = b.targets.data<T>();
  const Shard* mask = shard.loss_mask();
  for (int64_t r = 0; r < rows; ++r) {
    shard.read(starts[size_t(r)], width, window.data());
    for (int64_t t = 0; t < width; ++t) {
      const int32_t id = window[size_t(t)];
      // Cheap (B * T compares) and turns a corrupt shard into a clear error, not a bad gather.
      GDN_CHECK(id >= 0 && id < shard.vocab_size(), "token shard '", shard.path(), "': token ", id,
                " at index ", starts[size_t(r)] + t, " is >= the vocab size ", shard.vocab_size());
      tok[r * width + t] = T(id);
    }
    std::copy(tok + r * width, tok + r * width + seq_len, in + r * seq_len);
    std::copy(tok + r * width + 1, tok + (r + 1) * width, tgt + r * seq_len);
    if (!mask) continue;
    // A target is scored where the mask flags its token (the one at t + 1).
    scored.resize(size_t(width));
    mask->read(starts[size_t(r)], width, scored.data());
    for (int64_t t = 0; t < seq_len; ++t)
      if (!scored[size_t(t + 1)]) tgt[r * seq_len + t] = T(-100);
  }
}

Batch make_batch(const Shard& shard, std::vector<int64_t> starts, int64_t seq_len, DType dtype,
                 int64_t step) {
  Batch b;
  b.step = step;
  const int64_t rows = int64_t(starts.size());
  b.tokens = Tensor::empty({rows, seq_len + 1}, dtype);
  b.inputs = Tensor::empty({rows, seq_len}, dtype);
  b.targets = Tensor::empty({rows, seq_len}, dtype);
  if (dtype == DType::int32) {
    fill_rows<int32_t>(shard, starts, seq_len, b);
  } else {
    fill_rows<int64_t>(shard, starts, seq_len, b);
  }
  b.starts = std::move(starts);
  return b;
}

template <typename T>
void fill_packed_rows(const Shard& shard, const PackedRows& packed,
                      const std::vector<int64_t>& rows, Batch& b) {
  const int64_t width = packed.row_tokens, seq_len = width - 1;
  T* tok = b.tokens.data<T>();
  T* in = b.inputs.data<T>();
  T* tgt = b.targets.data<T>();
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t i = int64_t(r);
    fill_packed_row<T>(shard, packed, rows[r], tok + i * width, tgt + i * seq_len, i * seq_len,
                       b.cu_seqlens);
    std::copy(tok + i * width, tok + i * width + seq_len, in + i * seq_len);
    b.starts.push_back(packed.piece_start[size_t(packed.row_begin[size_t(rows[r])])]);
  }
  b.cu_seqlens.push_back(int64_t(rows.size()) * seq_len);
}

// A batch of packed rows (their indices in the layout).
Batch make_packed_batch(const Shard& shard, const PackedRows& packed,
                        const std::vector<int64_t>& rows, DType dtype, int64_t step) {
  Batch b;
  b.step = step;
  const int64_t n = int64_t(rows.size()), seq_len = packed.row_tokens - 1;
  b.tokens = Tensor::empty({n, seq_len + 1}, dtype);
  b.inputs = Tensor::empty({n, seq_len}, dtype);
  b.targets = Tensor::empty({n, seq_len}, dtype);
  if (dtype == DType::int32) {
    fill_packed_rows<int32_t>(shard, packed, rows, b);
  } else {
    fill_packed_rows<int64_t>(shard, packed, rows, b);
  }
  return b;
}

std::shared_ptr<const PackedRows> packed_layout(const Shard& shard, int32_t eos, int64_t seq_len) {
  if (eos < 0) return nullptr;
  return std::make_shared<const PackedRows>(pack_documents(shard, eos, seq_len));
}

void check_common(const Shard& shard, int64_t batch_size, int64_t seq_len, int rank, int world_size,
                  DType dtype, const char* what) {
  GDN_CHECK(batch_size >= 1, what, ": batch_size must be >= 1, got ", batch_size);
  GDN_CHECK(seq_len >= 1, what, ": seq_len must be >= 1, got ", seq_len);
  GDN_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, what, ": rank ", rank,
            " is outside [0, world_size = ", world_size, ")");
  GDN_CHECK(dtype == DType::int32 || dtype == DType::int64, what,
            ": token dtype must be int32 or int64, got ", dtype_name(dtype));
  GDN_CHECK(shard.size() >= seq_len + 1, what, ": shard '", shard.path(), "' has ", shard.size(),
            " tokens; a window of seq_len ", seq_len, " needs at least ", seq_len + 1);
}

}  // namespace

int64_t window_start(uint64_t seed, int64_t step, int64_t global_row, int64_t global_batch,
                     int64_t num_starts) {
  GDN_CHECK(step >= 0 && global_row >= 0 && global_row < global_batch && num_starts >= 1,
            "window_start: bad arguments (step ", step, ", global row ", global_row,
            ", global batch ", global_batch, ", num_starts ", num_starts, ")");
  GDN_CHECK(step <= int64_t((uint64_t(1) << kCounterBits) / uint64_t(global_batch)),
            "window_start: step ", step, " x global batch ", global_batch, " exceeds 2^",
            kCounterBits, " draws");
  const uint64_t counter = uint64_t(step) * uint64_t(global_batch) + uint64_t(global_row);
  const kern::Philox4 r = kern::philox4x32(counter, seed);
  const uint64_t bits = (uint64_t(r.x[0]) << 32) | r.x[1];
  return int64_t(bits % uint64_t(num_starts));  // bias <= num_starts / 2^64: negligible
}

// ---- DataLoader ------------------------------------------------------------------------------

DataLoader::DataLoader(std::shared_ptr<const Shard> shard, const LoaderOptions& options)
    : shard_(std::move(shard)), options_(options) {
  GDN_CHECK(shard_, "DataLoader: no shard");
  check_common(*shard_, options_.batch_size, options_.seq_len, options_.rank, options_.world_size,
               options_.dtype, "DataLoader");
  GDN_CHECK(!options_.prefetch || options_.prefetch_depth >= 1,
            "DataLoader: prefetch_depth must be >= 1, got ", options_.prefetch_depth);
  num_starts_ = shard_->size() - options_.seq_len;
  packed_ = packed_layout(*shard_, options_.pack_eos, options_.seq_len);
}

DataLoader::~DataLoader() {
  stop_worker();
}

Batch DataLoader::batch_at(int64_t step) const {
  GDN_CHECK(step >= 0, "DataLoader: step must be >= 0, got ", step);
  const int64_t global_batch = options_.batch_size * options_.world_size;
  if (packed_) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < options_.batch_size; ++i)
      rows.push_back(permuted_row(step * global_batch + options_.rank * options_.batch_size + i,
                                  packed_->num_rows(), options_.seed));
    return make_packed_batch(*shard_, *packed_, rows, options_.dtype, step);
  }
  std::vector<int64_t> starts(size_t(options_.batch_size));
  for (int64_t i = 0; i < options_.batch_size; ++i)
    starts[size_t(i)] = window_start(options_.seed, step, options_.rank * options_.batch_size + i,
                                     global_batch, num_starts_);
  return make_batch(*shard_, std::move(starts), options_.seq_len, options_.dtype, step);
}

Batch DataLoader::next() {
  if (!options_.prefetch) {
    Batch b = batch_at(next_step_);
    ++next_step_;
    return b;
  }
  if (!worker_.joinable()) start_worker();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty() || error_; });
  if (ready_.empty()) std::rethrow_exception(error_);  // earlier steps were delivered first
  Batch b = std::move(ready_.front());
  ready_.pop_front();
  ++next_step_;
  cv_.notify_all();
  return b;
}

LoaderState DataLoader::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {next_step_};
}

void DataLoader::set_state(const LoaderState& s) {
  GDN_CHECK(s.step >= 0, "DataLoader: cannot restore step ", s.step);
  stop_worker();
  ready_.clear();
  error_ = nullptr;
  next_step_ = produce_step_ = s.step;
}

void DataLoader::start_worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
    produce_step_ = next_step_ + int64_t(ready_.size());
  }
  worker_ = std::thread([this] { worker_loop(); });
}

void DataLoader::stop_worker() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void DataLoader::worker_loop() {
  for (;;) {
    int64_t step;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || int64_t(ready_.size()) < options_.prefetch_depth; });
      if (stop_) return;
      step = produce_step_;
    }
    try {
      Batch b = batch_at(step);  // outside the lock: the trainer keeps consuming meanwhile
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      ready_.push_back(std::move(b));
      ++produce_step_;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    cv_.notify_all();
  }
}

// ---- SequentialLoader ------------------------------------------------------------------------

SequentialLoader::SequentialLoader(std::shared_ptr<const Shard> shard, int64_t batch_size,
                                   int64_t seq_len, int64_t max_batches, int rank, int world_size,
                                   DType dtype, int32_t pack_eos)
    : shard_(std::move(shard)),
      batch_size_(batch_size),
      seq_len_(seq_len),
      rank_(rank),
      world_size_(world_size),
      dtype_(dtype) {
  GDN_CHECK(shard_, "SequentialLoader: no shard");
  check_common(*shard_, batch_size, seq_len, rank, world_size, dtype, "SequentialLoader");
  GDN_CHECK(max_batches >= 0, "SequentialLoader: max_batches must be >= 0, got ", max_batches);
  packed_ = packed_layout(*shard_, pack_eos, seq_len);
  // Windows (or packed rows) on all ranks.
  const int64_t total = packed_ ? packed_->num_rows() : (shard_->size() - 1) / seq_len;
  num_windows_ = total / world_size + (rank < total % world_size ? 1 : 0);
  num_batches_ = (num_windows_ + batch_size - 1) / batch_size;
  if (max_batches > 0) num_batches_ = std::min(num_batches_, max_batches);
}

bool SequentialLoader::next(Batch& out) {
  if (next_batch_ >= num_batches_) return false;
  const int64_t first = next_batch_ * batch_size_;
  const int64_t rows = std::min(batch_size_, num_windows_ - first);
  std::vector<int64_t> starts(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    starts[size_t(i)] = ((first + i) * world_size_ + rank_) * (packed_ ? 1 : seq_len_);
  if (packed_) {  // starts are row indices of the layout
    out = make_packed_batch(*shard_, *packed_, starts, dtype_, next_batch_);
    ++next_batch_;
    return true;
  }
  out = make_batch(*shard_, std::move(starts), seq_len_, dtype_, next_batch_);
  ++next_batch_;
  return true;
}

}  // namespace gdn::data
