// The MPI engine: non-blocking collectives (MPI_Iallreduce, MPI_Ibcast, ...) on CPU tensors,
// completed by polling MPI_Test against a deadline, so a dead or stuck peer becomes an error
// naming the operation instead of a hang. Errors return (MPI_ERRORS_RETURN) and go through
// GDN_MPI_CHECK, which names the failing call. Open MPI only progresses a non-blocking
// operation inside MPI calls: the gradient reducer calls test() as backward runs.
#include "src/dist/mpi_communicator.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

#include "src/ops/ops.h"

#define GDN_MPI_CHECK(expr)                                                                    \
  do {                                                                                         \
    const int gdn_mpi_rc_ = (expr);                                                            \
    if (gdn_mpi_rc_ != MPI_SUCCESS) {                                                          \
      char gdn_mpi_msg_[MPI_MAX_ERROR_STRING];                                                 \
      int gdn_mpi_len_ = 0;                                                                    \
      MPI_Error_string(gdn_mpi_rc_, gdn_mpi_msg_, &gdn_mpi_len_);                              \
      GDN_FAIL("MPI error in ", #expr, ": ", std::string(gdn_mpi_msg_, size_t(gdn_mpi_len_))); \
    }                                                                                          \
  } while (0)

namespace gdn::dist {

namespace {

std::mutex g_init_mu;
bool g_started = false;  // MPI_Init_thread was called by us

bool finalized() {
  int f = 0;
  MPI_Finalized(&f);
  return f != 0;
}

void finalize_at_exit() {
  finalize();
}

void ensure_init() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  GDN_CHECK(!finalized(), "MPI was already finalized in this process");
  int inited = 0;
  GDN_MPI_CHECK(MPI_Initialized(&inited));
  if (inited) return;
  int provided = 0;
  // Funneled: only the thread that made the communicator calls MPI (the data loader's worker
  // and the OpenMP threads never do).
  GDN_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
  GDN_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  g_started = true;
  std::atexit(finalize_at_exit);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Element type for MPI; half types can move (as 16-bit words) but not be reduced.
MPI_Datatype mpi_type(DType d, bool reducing, const char* op) {
  switch (d) {
    case DType::float32:
      return MPI_FLOAT;
    case DType::float64:
      return MPI_DOUBLE;
    case DType::int32:
      return MPI_INT32_T;
    case DType::int64:
      return MPI_INT64_T;
    case DType::bfloat16:
    case DType::float16:
      GDN_CHECK(!reducing, "mpi ", op, ": cannot reduce ", dtype_name(d),
                " tensors (reduce fp32 master gradients)");
      return MPI_UINT16_T;
  }
  GDN_FAIL("mpi ", op, ": unsupported dtype");
}

constexpr int64_t kMaxChunk = int64_t(1) << 30;  // MPI counts are ints

class MpiWork final : public Work {
 public:
  MpiWork(const Communicator& comm, std::string what, std::vector<Tensor> keep)
      : comm_(comm), what_(std::move(what)), keep_(std::move(keep)) {}
  ~MpiWork() override {
    if (done_) return;
    try {
      if (test()) return;
    } catch (const Error&) {
    }
    // Still in flight (a wait() timed out): MPI may yet write into these buffers, so they are
    // deliberately leaked rather than freed under it.
    new std::vector<Tensor>(std::move(keep_));
  }
  void add(MPI_Request r) { requests_.push_back(r); }
  void on_done(std::function<void()> fn) { on_done_ = std::move(fn); }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    GDN_MPI_CHECK(MPI_Testall(int(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE));
    if (!flag) return false;
    done_ = true;
    if (on_done_) on_done_();
    keep_.clear();
    return true;
  }

  void wait() override {
    if (test()) return;
    const double start = now_s();
    // Spin briefly (a peer is usually microseconds behind), then poll gently so a rank that
    // waits for a slow one does not take a core from it.
    for (;;) {
      if (test()) return;
      const double waited = now_s() - start;
      if (waited > comm_.timeout()) GDN_FAIL(detail::timeout_message(comm_, what_, waited));
      if (waited > 1e-3) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  const Communicator& comm_;
  std::string what_;
  std::vector<Tensor> keep_;
  std::vector<MPI_Request> requests_;
  std::function<void()> on_done_;
  bool done_ = false;
};

std::string describe(const char* op, const Tensor& t) {
  return str_cat(op, " of ", t.numel(), " ", dtype_name(t.dtype()), " (", t.nbytes(), " bytes)");
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    ensure_init();
    GDN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    GDN_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    GDN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    GDN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  }
  ~MpiCommunicator() override {
    if (!finalized()) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }
  Device device() const override { return Device::cpu(); }

  std::unique_ptr<Work> all_reduce_async(Tensor t, ReduceOp op) override {
    detail::check_tensor(*this, "all_reduce", t);
    const MPI_Datatype type = mpi_type(t.dtype(), true, "all_reduce");
    GDN_CHECK(op == ReduceOp::sum || is_floating(t.dtype()),
              "mpi all_reduce: avg of an integer tensor");
    auto w = std::make_unique<MpiWork>(*this, describe("all_reduce", t), std::vector<Tensor>{t});
    char* p = static_cast<char*>(t.data_ptr());
    const int64_t n = t.numel(), es = int64_t(t.element_size());
    for (int64_t off = 0; off < n; off += kMaxChunk) {
      MPI_Request r;
      GDN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, p + off * es, int(std::min(kMaxChunk, n - off)),
                                   type, MPI_SUM, comm_, &r));
      w->add(r);
    }
    if (op == ReduceOp::avg && size_ > 1)
      w->on_done([t, s = size_]() mutable { ops::mul_(t, 1.0 / double(s)); });
    return w;
  }

  std::unique_ptr<Work> broadcast_async(Tensor t, int root) override {
    detail::check_tensor(*this, "broadcast", t);
    GDN_CHECK(root >= 0 && root < size_, "mpi broadcast: root ", root, " of ", size_, " ranks");
    auto w = std::make_unique<MpiWork>(*this, describe("broadcast", t), std::vector<Tensor>{t});
    char* p = static_cast<char*>(t.data_ptr());
    const int64_t n = int64_t(t.nbytes());
    for (int64_t off = 0; off < n; off += kMaxChunk) {
      MPI_Request r;
      GDN_MPI_CHECK(
          MPI_Ibcast(p + off, int(std::min(kMaxChunk, n - off)), MPI_BYTE, root, comm_, &r));
      w->add(r);
    }
    return w;
  }

  std::unique_ptr<Work> all_gather_async(Tensor in, Tensor out) override {
    detail::check_tensor(*this, "all_gather", in);
    detail::check_tensor(*this, "all_gather", out);
    GDN_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * size_,
              "mpi all_gather: out ", out.str(), " must hold ", size_, " x in ", in.str());
    GDN_CHECK(in.storage() != out.storage(), "mpi all_gather: in and out must not overlap");
    GDN_CHECK(int64_t(in.nbytes()) <= INT_MAX, "mpi all_gather: ", in.nbytes(),
              " bytes per rank exceed MPI's int count");
    auto w =
        std::make_unique<MpiWork>(*this, describe("all_gather", in), std::vector<Tensor>{in, out});
    MPI_Request r;
    GDN_MPI_CHECK(MPI_Iallgather(in.data_ptr(), int(in.nbytes()), MPI_BYTE, out.data_ptr(),
                                 int(in.nbytes()), MPI_BYTE, comm_, &r));
    w->add(r);
    return w;
  }

  std::unique_ptr<Work> reduce_scatter_async(Tensor in, Tensor out, ReduceOp op) override {
    detail::check_tensor(*this, "reduce_scatter", in);
    detail::check_tensor(*this, "reduce_scatter", out);
    GDN_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * size_,
              "mpi reduce_scatter: in ", in.str(), " must hold ", size_, " x out ", out.str());
    GDN_CHECK(in.storage() != out.storage(), "mpi reduce_scatter: in and out must not overlap");
    GDN_CHECK(out.numel() <= INT_MAX, "mpi reduce_scatter: ", out.numel(),
              " elements per rank exceed MPI's int count");
    GDN_CHECK(op == ReduceOp::sum || is_floating(out.dtype()),
              "mpi reduce_scatter: avg of an integer tensor");
    const MPI_Datatype type = mpi_type(in.dtype(), true, "reduce_scatter");
    auto w = std::make_unique<MpiWork>(*this, describe("reduce_scatter", in),
                                       std::vector<Tensor>{in, out});
    MPI_Request r;
    GDN_MPI_CHECK(MPI_Ireduce_scatter_block(in.data_ptr(), out.data_ptr(), int(out.numel()), type,
                                            MPI_SUM, comm_, &r));
    w->add(r);
    if (op == ReduceOp::avg && size_ > 1)
      w->on_done([out, s = size_]() mutable { ops::mul_(out, 1.0 / double(s)); });
    return w;
  }

  std::unique_ptr<Work> barrier_async() override {
    auto w = std::make_unique<MpiWork>(*this, "barrier", std::vector<Tensor>{});
    MPI_Request r;
    GDN_MPI_CHECK(MPI_Ibarrier(comm_, &r));
    w->add(r);
    return w;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace

namespace detail {
std::string timeout_message(const Communicator& c, const std::string& op, double waited_s) {
  return str_cat("rank ", c.rank(), " of ", c.size(), " (", c.backend(), "): ", op,
                 " did not complete within ", waited_s,
                 " s: another rank died, hung, or is running a different operation (a rank that "
                 "is only slow, e.g. preparing data, needs a larger dist.timeout_s)");
}
}  // namespace detail

std::shared_ptr<Communicator> make_mpi_communicator(double timeout_s) {
  auto c = std::make_shared<MpiCommunicator>();
  c->set_timeout(timeout_s);
  return c;
}

bool mpi_active() {
  return g_started && !finalized();
}

void finalize() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g_started && !finalized()) MPI_Finalize();
}

void abort_job(int code) {
  if (!mpi_active()) return;
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace gdn::dist
