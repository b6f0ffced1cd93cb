// Collectives between the processes of a data-parallel run. One interface, three engines:
//   single  one process (a plain `gdn train`): every op is the identity; MPI is never touched
//   mpi     Open MPI on CPU tensors (`mpirun -np N gdn train ...`)
//   nccl    NCCL on CUDA tensors, one process per GPU, its own stream; bootstrapped through MPI
// Every op has an asynchronous form returning a Work; the blocking form is async + wait().
// wait() never hangs silently: past the communicator's timeout (dist.timeout_s) it throws an
// error naming the operation, its size and the rank (a peer died, hung, or runs another op).
// Reductions are deterministic for a fixed world size and tensor size (MPI and NCCL pick their
// algorithm from those alone; with fp32 sums every rank receives the same bits).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "kernels/enum_table.h"

#include "src/core/tensor.h"

namespace gdn::dist {

enum class ReduceOp { sum, avg };

// An operation in flight. Keeps its tensors alive until it completes.
class Work {
 public:
  virtual ~Work() = default;
  // Progresses the operation (MPI only moves while called); true once it is complete.
  virtual bool test() = 0;
  // Blocks until complete; throws gdn::Error naming the op after the communicator's timeout.
  virtual void wait() = 0;
};

// How this process was started: from mpirun's environment (OMPI_COMM_WORLD_* or PMI_*).
struct LaunchInfo {
  bool under_mpi = false;  // started by mpirun / a PMI launcher
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;  // rank among the processes of this machine (picks the GPU)
};
LaunchInfo launch_info();

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "single", "mpi" or "nccl"
  // Where its tensors must live: cpu (single, mpi) or cuda:N (nccl).
  virtual Device device() const = 0;

  // In place on `t` (contiguous, on device()); avg divides the sum by size().
  virtual std::unique_ptr<Work> all_reduce_async(Tensor t, ReduceOp op) = 0;
  // In place: every rank receives root's `t`.
  virtual std::unique_ptr<Work> broadcast_async(Tensor t, int root) = 0;
  // out (size() * in.numel() elements) = the ins of ranks 0, 1, ... concatenated.
  virtual std::unique_ptr<Work> all_gather_async(Tensor in, Tensor out) = 0;
  // in (size() * out.numel() elements) is reduced over ranks; rank r receives chunk r in out.
  virtual std::unique_ptr<Work> reduce_scatter_async(Tensor in, Tensor out, ReduceOp op) = 0;
  virtual std::unique_ptr<Work> barrier_async() = 0;

  void all_reduce(Tensor t, ReduceOp op = ReduceOp::sum) {
    all_reduce_async(std::move(t), op)->wait();
  }
  void broadcast(Tensor t, int root = 0) { broadcast_async(std::move(t), root)->wait(); }
  void all_gather(Tensor in, Tensor out) {
    all_gather_async(std::move(in), std::move(out))->wait();
  }
  void reduce_scatter(Tensor in, Tensor out, ReduceOp op = ReduceOp::sum) {
    reduce_scatter_async(std::move(in), std::move(out), op)->wait();
  }
  void barrier() { barrier_async()->wait(); }

  // Small host values (losses, flags, checks), always through the CPU engine (MPI under nccl).
  // Sums `values` over ranks in place.
  void all_reduce_host(std::vector<double>& values);
  // Each rank gives the same number of values; returns them rank by rank.
  std::vector<int64_t> all_gather_host(const std::vector<int64_t>& values);
  // Root's bytes to every rank (resized on the receivers).
  void broadcast_host(std::vector<uint8_t>& bytes, int root);

  // Seconds a wait() may block before it fails (dist.timeout_s).
  void set_timeout(double seconds);
  double timeout() const { return timeout_s_; }

 protected:
  // The CPU communicator the host helpers use: this one, except for nccl (its MPI bootstrap).
  virtual Communicator& host() { return *this; }

 private:
  double timeout_s_ = 300;
};

// The communicator of a run. Not launched under mpirun: a single-process one (MPI untouched).
// Under mpirun: backend "mpi" (CPU tensors), "nccl" (CUDA tensors on `device`), or "auto"
// (nccl when `device` is CUDA, else mpi). Each call makes a new communicator (a duplicate of
// MPI_COMM_WORLD, or a new NCCL communicator), so a stuck op of one never reaches another.
enum class Backend { automatic, mpi, nccl };
inline constexpr EnumEntry<Backend> kBackendNames[] = {
    {Backend::automatic, "auto"}, {Backend::mpi, "mpi"}, {Backend::nccl, "nccl"}};
inline EnumTable<Backend> enum_table(Backend) {
  return kBackendNames;
}
std::shared_ptr<Communicator> make_communicator(Backend backend, Device device,
                                                double timeout_s = 300);
// The same by name ("auto", "mpi", "nccl"; anything else is an error naming it).
std::shared_ptr<Communicator> make_communicator(const std::string& backend, Device device,
                                                double timeout_s = 300);
// A one-process communicator (rank 0 of 1): the reference runs of the tests use it.
std::shared_ptr<Communicator> single_communicator();

// Whether MPI was initialised by this process (make_communicator under mpirun).
bool mpi_active();
// Ends MPI (MPI_Finalize) if it was started; also registered with atexit. Idempotent.
void finalize();
// After an error on one rank: kills every rank of the job (MPI_Abort) so none waits forever.
// Does nothing when MPI is not active.
void abort_job(int code);

}  // namespace gdn::dist
