// GradReducer: bucket planning, grads as views into the bucket buffers, hook-driven starts in
// bucket order, and the final wait.
#include "src/dist/grad_reducer.h"

#include <chrono>

#include "src/core/allocator.h"
#include "src/ops/ops.h"

namespace gdn::dist {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Adds the wall time of its scope to `acc`.
class Timer {
 public:
  explicit Timer(double& acc) : acc_(acc), start_(now_s()) {}
  ~Timer() { acc_ += now_s() - start_; }

 private:
  double& acc_;
  double start_;
};

}  // namespace

std::vector<std::vector<size_t>> assign_buckets(const std::vector<int64_t>& param_bytes,
                                                int64_t cap_bytes) {
  GDN_CHECK(cap_bytes >= 0, "assign_buckets: cap must be >= 0 bytes, got ", cap_bytes);
  std::vector<std::vector<size_t>> out;
  int64_t filled = 0;
  for (size_t k = param_bytes.size(); k-- > 0;) {
    const int64_t b = param_bytes[k];
    GDN_CHECK(b >= 0, "assign_buckets: parameter ", k, " has ", b, " bytes");
    if (out.empty() || cap_bytes == 0 || filled + b > cap_bytes) {
      if (out.empty() || !out.back().empty()) out.emplace_back();
      filled = 0;
    }
    out.back().push_back(k);
    filled += b;
  }
  return out;
}

GradReducer::GradReducer(std::vector<Tensor> params, std::shared_ptr<Communicator> comm,
                         int64_t bucket_bytes)
    : params_(std::move(params)), comm_(std::move(comm)) {
  GDN_CHECK(comm_, "GradReducer: no communicator");
  GDN_CHECK(!params_.empty(), "GradReducer: no parameters");
  std::vector<int64_t> bytes;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    GDN_CHECK(p.defined() && p.is_leaf() && is_floating(p.dtype()), "GradReducer: parameter ", i,
              " must be a floating leaf tensor");
    GDN_CHECK(p.dtype() == params_[0].dtype() && p.device() == params_[0].device(),
              "GradReducer: parameter ", i, " is ", p.str(), " but parameter 0 is ",
              params_[0].str(), " (one dtype and device per reducer)");
    bytes.push_back(int64_t(p.nbytes()));
  }
  plan_ = assign_buckets(bytes, bucket_bytes);
  bucket_of_.resize(params_.size());
  ready_.assign(params_.size(), 0);
  // The bucket buffers replace the gradients: allocate them as such.
  MemoryCategoryScope cat(MemCategory::grad);
  for (size_t b = 0; b < plan_.size(); ++b) {
    Bucket bk;
    bk.params = plan_[b];
    int64_t n = 0;
    for (size_t i : bk.params) n += params_[i].numel();
    bk.flat = ops::zeros({n}, params_[0].dtype(), params_[0].device());
    int64_t off = 0;
    for (size_t i : bk.params) {
      const Tensor& p = params_[i];
      Tensor v = ops::reshape(ops::slice(bk.flat, 0, off, off + p.numel()), p.shape());
      GDN_CHECK(v.storage() == bk.flat.storage(), "GradReducer: bucket view is not a view");
      bk.views.push_back(v);
      off += p.numel();
      bucket_of_[i] = b;
    }
    buckets_.push_back(std::move(bk));
  }
  for (size_t i = 0; i < params_.size(); ++i)
    hooks_.emplace_back(params_[i], [this, i] { on_ready(i); });
  zero_grads();
}

int64_t GradReducer::bucket_bytes_total() const {
  int64_t n = 0;
  for (const Bucket& b : buckets_) n += int64_t(b.flat.nbytes());
  return n;
}

void GradReducer::zero_grads() {
  for (Bucket& b : buckets_) {
    GDN_CHECK(!b.work, "GradReducer::zero_grads while an all-reduce is in flight");
    ops::zero_(b.flat);
    for (size_t k = 0; k < b.params.size(); ++k) {
      Tensor& p = params_[b.params[k]];
      if (!p.grad().same(b.views[k])) p.set_grad(b.views[k]);
    }
  }
}

void GradReducer::arm() {
  armed_ = true;
  std::fill(ready_.begin(), ready_.end(), uint8_t(0));
  for (Bucket& b : buckets_) b.pending = int(b.params.size());
  next_start_ = 0;
  comm_s_ = wait_s_ = 0;
  started_in_backward_ = 0;
}

void GradReducer::on_ready(size_t i) {
  if (!armed_) return;  // an earlier micro-batch: gradients still accumulate
  GDN_CHECK(!ready_[i], "GradReducer: the gradient of parameter ", i,
            " became final twice in one backward (is it used both inside and outside a "
            "checkpointed region?)");
  ready_[i] = 1;
  Bucket& b = buckets_[bucket_of_[i]];
  if (--b.pending == 0) start_ready_buckets();
  poll();
}

void GradReducer::start_ready_buckets() {
  while (next_start_ < buckets_.size() && buckets_[next_start_].pending == 0) start(next_start_++);
}

void GradReducer::start(size_t bi) {
  Timer t(comm_s_);
  Bucket& b = buckets_[bi];
  // Backward accumulates into the views; a grad replaced meanwhile (set_grad, zero_grad) is
  // copied back into its slot so the bucket is whole.
  for (size_t k = 0; k < b.params.size(); ++k) {
    Tensor& p = params_[b.params[k]];
    Tensor g = p.grad();
    if (g.same(b.views[k])) continue;
    if (g.defined())
      ops::copy_(b.views[k], g);
    else
      ops::zero_(b.views[k]);
    p.set_grad(b.views[k]);
  }
  b.work = comm_->all_reduce_async(b.flat, ReduceOp::avg);
}

void GradReducer::poll() {
  Timer t(comm_s_);
  for (size_t k = 0; k < next_start_; ++k)
    if (buckets_[k].work) buckets_[k].work->test();
}

void GradReducer::finish() {
  if (!armed_) arm();  // no armed backward ran (e.g. no parameter was used): reduce all
  started_in_backward_ = int(next_start_);
  // Whatever did not become final (parameters unused in this step) is reduced as it is.
  for (Bucket& b : buckets_) b.pending = 0;
  start_ready_buckets();
  {
    Timer tw(wait_s_);
    Timer tc(comm_s_);
    for (size_t k = 0; k < buckets_.size(); ++k) {
      Bucket& b = buckets_[k];
      try {
        b.work->wait();
      } catch (const Error& e) {
        GDN_FAIL("gradient all-reduce of bucket ", k, " of ", buckets_.size(), " (",
                 b.params.size(), " parameters): ", e.what());
      }
      b.work.reset();
    }
  }
  armed_ = false;
}

}  // namespace gdn::dist
