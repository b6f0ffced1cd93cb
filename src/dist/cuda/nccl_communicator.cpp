// The NCCL engine: one communicator per process and GPU, created non-blocking (so init and
// every wait can time out and abort instead of hanging), collectives on its own stream. Each op
// waits for the device's compute stream through an event, so it sees the gradients the
// backward enqueued there, and records a completion event that test()/wait() poll and the
// compute stream waits on afterwards.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "src/core/cuda/cuda_check.h"
#include "src/core/cuda/cuda_context.h"
#include "src/dist/cuda/nccl_api.h"
#include "src/dist/mpi_communicator.h"
#include "src/dist/nccl_communicator.h"

// ncclInProgress is not a failure on a non-blocking communicator: the call completes later and
// its outcome is read with ncclCommGetAsyncError (settle()).
#define GDN_NCCL_CHECK(expr)                                                                 \
  do {                                                                                       \
    const ncclResult_t gdn_nccl_rc_ = (expr);                                                \
    if (gdn_nccl_rc_ != ncclSuccess && gdn_nccl_rc_ != ncclInProgress)                       \
      GDN_FAIL("NCCL error in ", #expr, ": ", nccl().ncclGetErrorString(gdn_nccl_rc_), " (", \
               nccl().ncclGetLastError(nullptr), ")");                                       \
  } while (0)

namespace gdn::dist {

namespace {

// NCCL's functions; make_nccl_communicator has checked that they are there.
const NcclApi& nccl() {
  return *nccl_api_or_null();
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::float32:
      return ncclFloat32;
    case DType::float64:
      return ncclFloat64;
    case DType::bfloat16:
      return ncclBfloat16;
    case DType::float16:
      return ncclFloat16;
    case DType::int32:
      return ncclInt32;
    case DType::int64:
      return ncclInt64;
  }
  GDN_FAIL("nccl: unsupported dtype");
}

std::string describe(const char* op, const Tensor& t) {
  return str_cat(op, " of ", t.numel(), " ", dtype_name(t.dtype()), " (", t.nbytes(), " bytes)");
}

class NcclCommunicator;

class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator& comm, std::string what, std::vector<Tensor> keep);
  ~NcclWork() override;
  bool test() override;
  void wait() override;
  cudaEvent_t done_event() const { return done_; }

 private:
  NcclCommunicator& comm_;
  std::string what_;
  std::vector<Tensor> keep_;
  cudaEvent_t done_ = nullptr;
  bool complete_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<Communicator> host, Device device, double timeout_s)
      : host_(std::move(host)), device_(device) {
    GDN_CHECK(host_, "nccl: no host communicator");
    GDN_CHECK(device.is_cuda(), "nccl: device must be cuda, got ", device.str());
    set_timeout(timeout_s);
    rank_ = host_->rank();
    size_ = host_->size();
    cuda::set_device(device_.index);
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank_ == 0) GDN_NCCL_CHECK(nccl().ncclGetUniqueId(&id));
    std::vector<uint8_t> bytes(sizeof id);
    std::memcpy(bytes.data(), &id, sizeof id);
    host_->broadcast_host(bytes, 0);
    GDN_CHECK(bytes.size() == sizeof id, "nccl: unique id of ", bytes.size(), " bytes");
    std::memcpy(&id, bytes.data(), sizeof id);
    GDN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    try {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      GDN_NCCL_CHECK(nccl().ncclCommInitRankConfig(&comm_, size_, id, rank_, &config));
      settle("ncclCommInitRankConfig");
    } catch (...) {  // no destructor runs for a constructor that throws
      abort_comm();
      cudaStreamDestroy(stream_);
      throw;
    }
  }

  ~NcclCommunicator() override {
    if (comm_ && !aborted_) {
      // Flush, then free; errors here cannot be reported any more.
      if (nccl().ncclCommFinalize(comm_) == ncclInProgress) {
        const double start = now_s();
        ncclResult_t st = ncclInProgress;
        while (st == ncclInProgress && now_s() - start < timeout()) {
          nccl().ncclCommGetAsyncError(comm_, &st);
          std::this_thread::yield();
        }
      }
      nccl().ncclCommDestroy(comm_);
    }
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }
  Device device() const override { return device_; }

  std::unique_ptr<Work> all_reduce_async(Tensor t, ReduceOp op) override {
    detail::check_tensor(*this, "all_reduce", t);
    auto w = begin(describe("all_reduce", t), {t});
    GDN_NCCL_CHECK(nccl().ncclAllReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()),
                                        nccl_type(t.dtype()),
                                        op == ReduceOp::avg ? ncclAvg : ncclSum, comm_, stream_));
    return end(std::move(w), "ncclAllReduce");
  }

  std::unique_ptr<Work> broadcast_async(Tensor t, int root) override {
    detail::check_tensor(*this, "broadcast", t);
    GDN_CHECK(root >= 0 && root < size_, "nccl broadcast: root ", root, " of ", size_, " ranks");
    auto w = begin(describe("broadcast", t), {t});
    GDN_NCCL_CHECK(nccl().ncclBroadcast(t.data_ptr(), t.data_ptr(), t.nbytes(), ncclUint8, root,
                                        comm_, stream_));
    return end(std::move(w), "ncclBroadcast");
  }

  std::unique_ptr<Work> all_gather_async(Tensor in, Tensor out) override {
    detail::check_tensor(*this, "all_gather", in);
    detail::check_tensor(*this, "all_gather", out);
    GDN_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * size_,
              "nccl all_gather: out ", out.str(), " must hold ", size_, " x in ", in.str());
    auto w = begin(describe("all_gather", in), {in, out});
    GDN_NCCL_CHECK(nccl().ncclAllGather(in.data_ptr(), out.data_ptr(), in.nbytes(), ncclUint8,
                                        comm_, stream_));
    return end(std::move(w), "ncclAllGather");
  }

  std::unique_ptr<Work> reduce_scatter_async(Tensor in, Tensor out, ReduceOp op) override {
    detail::check_tensor(*this, "reduce_scatter", in);
    detail::check_tensor(*this, "reduce_scatter", out);
    GDN_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * size_,
              "nccl reduce_scatter: in ", in.str(), " must hold ", size_, " x out ", out.str());
    auto w = begin(describe("reduce_scatter", in), {in, out});
    GDN_NCCL_CHECK(nccl().ncclReduceScatter(
        in.data_ptr(), out.data_ptr(), size_t(out.numel()), nccl_type(in.dtype()),
        op == ReduceOp::avg ? ncclAvg : ncclSum, comm_, stream_));
    return end(std::move(w), "ncclReduceScatter");
  }

  // A barrier is a host matter: the MPI one (device work is ordered by streams, not by it).
  std::unique_ptr<Work> barrier_async() override { return host_->barrier_async(); }

  // Polls the communicator until a non-blocking call has finished; fails on error or timeout.
  void settle(const char* what) {
    const double start = now_s();
    for (;;) {
      ncclResult_t st = ncclSuccess;
      GDN_NCCL_CHECK(nccl().ncclCommGetAsyncError(comm_, &st));
      if (st == ncclSuccess) return;
      if (st != ncclInProgress) {
        abort_comm();
        GDN_FAIL("NCCL error in ", what, ": ", nccl().ncclGetErrorString(st));
      }
      const double waited = now_s() - start;
      if (waited > timeout()) {
        abort_comm();
        GDN_FAIL(detail::timeout_message(*this, what, waited));
      }
      std::this_thread::yield();
    }
  }

  // Errors reported asynchronously by NCCL (a peer died, a network error).
  void check_async(const std::string& what) {
    ncclResult_t st = ncclSuccess;
    GDN_NCCL_CHECK(nccl().ncclCommGetAsyncError(comm_, &st));
    if (st != ncclSuccess && st != ncclInProgress) {
      abort_comm();
      GDN_FAIL("NCCL error during ", what, ": ", nccl().ncclGetErrorString(st));
    }
  }

  void abort_comm() {
    if (comm_ && !aborted_) nccl().ncclCommAbort(comm_);
    aborted_ = true;
  }

  cudaStream_t compute_stream() const {
    return static_cast<cudaStream_t>(cuda::current_stream(device_.index));
  }

 protected:
  Communicator& host() override { return *host_; }

 private:
  // The op's stream waits for the compute stream's work so far (the tensors' producers).
  std::unique_ptr<NcclWork> begin(std::string what, std::vector<Tensor> keep) {
    GDN_CHECK(!aborted_, "nccl: the communicator was aborted after an earlier error");
    cuda::set_device(device_.index);
    cudaEvent_t ready;
    GDN_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    GDN_CUDA_CHECK(cudaEventRecord(ready, compute_stream()));
    GDN_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready, 0));
    GDN_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait has been satisfied
    return std::make_unique<NcclWork>(*this, std::move(what), std::move(keep));
  }
  std::unique_ptr<Work> end(std::unique_ptr<NcclWork> w, const char* call) {
    settle(call);
    GDN_CUDA_CHECK(cudaEventRecord(w->done_event(), stream_));
    return w;
  }

  std::shared_ptr<Communicator> host_;
  Device device_;
  int rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool aborted_ = false;
};

NcclWork::NcclWork(NcclCommunicator& comm, std::string what, std::vector<Tensor> keep)
    : comm_(comm), what_(std::move(what)), keep_(std::move(keep)) {
  GDN_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

NcclWork::~NcclWork() {
  if (!complete_ && cudaEventQuery(done_) != cudaSuccess) {
    // Still in flight (a wait() timed out): keep the buffers rather than free them under NCCL.
    new std::vector<Tensor>(std::move(keep_));
  }
  cudaEventDestroy(done_);
}

bool NcclWork::test() {
  if (complete_) return true;
  const cudaError_t st = cudaEventQuery(done_);
  if (st == cudaErrorNotReady) {
    comm_.check_async(what_);
    return false;
  }
  GDN_CUDA_CHECK(st);
  complete_ = true;
  // Later work on the compute stream reads the result: order it after the collective.
  GDN_CUDA_CHECK(cudaStreamWaitEvent(comm_.compute_stream(), done_, 0));
  keep_.clear();
  return true;
}

void NcclWork::wait() {
  const double start = now_s();
  while (!test()) {
    const double waited = now_s() - start;
    if (waited > comm_.timeout()) {
      comm_.abort_comm();
      GDN_FAIL(detail::timeout_message(comm_, what_, waited));
    }
    std::this_thread::yield();
  }
}

}  // namespace

std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> host,
                                                     Device device, double timeout_s) {
  const std::string refused = nccl_refusal(nccl_info());
  GDN_CHECK(refused.empty(), refused);
  return std::make_shared<NcclCommunicator>(std::move(host), device, timeout_s);
}

}  // namespace gdn::dist
