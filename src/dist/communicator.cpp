// The launch environment, the single-process communicator, the host helpers shared by every
// engine, and make_communicator's choice of engine.
#include "src/dist/communicator.h"

#include <cstdlib>
#include <cstring>

#include "src/dist/mpi_communicator.h"
#include "src/dist/nccl_communicator.h"
#include "src/ops/ops.h"

namespace gdn::dist {

namespace {

// An integer from the environment, or -1 when unset or not a number.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return *end == '\0' && x >= 0 ? int(x) : -1;
}

class DoneWork final : public Work {
 public:
  bool test() override { return true; }
  void wait() override {}
};

Tensor flat(const Tensor& t) {
  return ops::reshape(t, {t.numel()});
}

// One process: every collective is the identity (all_gather / reduce_scatter copy).
class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "single"; }
  Device device() const override { return Device::cpu(); }

  std::unique_ptr<Work> all_reduce_async(Tensor t, ReduceOp) override {
    GDN_CHECK(t.defined(), "single all_reduce: undefined tensor");
    return std::make_unique<DoneWork>();
  }
  std::unique_ptr<Work> broadcast_async(Tensor t, int root) override {
    GDN_CHECK(t.defined() && root == 0, "single broadcast: root ", root, " of 1 rank");
    return std::make_unique<DoneWork>();
  }
  std::unique_ptr<Work> all_gather_async(Tensor in, Tensor out) override {
    GDN_CHECK(in.defined() && out.defined() && in.numel() == out.numel(),
              "single all_gather: out must hold in.numel() elements");
    Tensor o = flat(out);
    ops::copy_(o, flat(in));
    return std::make_unique<DoneWork>();
  }
  std::unique_ptr<Work> reduce_scatter_async(Tensor in, Tensor out, ReduceOp) override {
    GDN_CHECK(in.defined() && out.defined() && in.numel() == out.numel(),
              "single reduce_scatter: out must hold in.numel() elements");
    Tensor o = flat(out);
    ops::copy_(o, flat(in));
    return std::make_unique<DoneWork>();
  }
  std::unique_ptr<Work> barrier_async() override { return std::make_unique<DoneWork>(); }
};

}  // namespace

LaunchInfo launch_info() {
  LaunchInfo li;
  // Open MPI's mpirun, then the PMI variables of MPICH / Slurm launchers.
  int size = env_int("OMPI_COMM_WORLD_SIZE"), rank = env_int("OMPI_COMM_WORLD_RANK");
  int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
  if (size < 0) {
    size = env_int("PMI_SIZE");
    rank = env_int("PMI_RANK");
    local = env_int("MPI_LOCALRANKID");
  }
  if (size < 1 || rank < 0 || rank >= size) return li;
  li.under_mpi = true;
  li.world_size = size;
  li.rank = rank;
  li.local_rank = local >= 0 ? local : rank;
  return li;
}

void Communicator::set_timeout(double seconds) {
  GDN_CHECK(seconds > 0, "dist timeout must be > 0 seconds, got ", seconds);
  timeout_s_ = seconds;
}

void Communicator::all_reduce_host(std::vector<double>& values) {
  if (size() == 1 || values.empty()) return;
  Tensor t = Tensor::empty({int64_t(values.size())}, DType::float64);
  std::memcpy(t.data<double>(), values.data(), values.size() * sizeof(double));
  host().all_reduce(t, ReduceOp::sum);
  std::memcpy(values.data(), t.data<double>(), values.size() * sizeof(double));
}

std::vector<int64_t> Communicator::all_gather_host(const std::vector<int64_t>& values) {
  if (size() == 1) return values;
  const int64_t n = int64_t(values.size());
  GDN_CHECK(n > 0, "all_gather_host: no values");
  Tensor in = Tensor::empty({n}, DType::int64), out = Tensor::empty({n * size()}, DType::int64);
  std::memcpy(in.data<int64_t>(), values.data(), size_t(n) * sizeof(int64_t));
  host().all_gather(in, out);
  const int64_t* o = out.data<int64_t>();
  return std::vector<int64_t>(o, o + n * size());
}

void Communicator::broadcast_host(std::vector<uint8_t>& bytes, int root) {
  if (size() == 1) return;
  // The length first, then the bytes packed in int64 words (the tensors have no byte dtype).
  Tensor len = Tensor::empty({1}, DType::int64);
  len.data<int64_t>()[0] = int64_t(bytes.size());
  host().broadcast(len, root);
  const int64_t n = len.data<int64_t>()[0];
  const int64_t words = (n + 7) / 8;
  if (words == 0) {
    bytes.clear();
    return;
  }
  Tensor buf = Tensor::empty({words}, DType::int64);
  std::memset(buf.data_ptr(), 0, size_t(words) * 8);
  if (rank() == root) std::memcpy(buf.data_ptr(), bytes.data(), size_t(n));
  host().broadcast(buf, root);
  bytes.resize(size_t(n));
  std::memcpy(bytes.data(), buf.data_ptr(), size_t(n));
}

std::shared_ptr<Communicator> single_communicator() {
  return std::make_shared<SingleCommunicator>();
}

std::shared_ptr<Communicator> make_communicator(const std::string& backend, Device device,
                                                double timeout_s) {
  const auto b = enum_table(Backend{}).parse(backend);
  GDN_CHECK(b, "dist.backend '", backend, "' is not one of auto, mpi, nccl");
  return make_communicator(*b, device, timeout_s);
}

std::shared_ptr<Communicator> make_communicator(Backend backend, Device device, double timeout_s) {
  std::shared_ptr<Communicator> c;
  if (!launch_info().under_mpi) {
    c = single_communicator();  // a plain `gdn train`: MPI is never initialised
  } else {
    const bool nccl =
        backend == Backend::nccl || (backend == Backend::automatic && device.is_cuda());
    if (nccl) {
      GDN_CHECK(device.is_cuda(), "dist.backend nccl needs train.device cuda, got ", device.str());
      c = make_nccl_communicator(make_mpi_communicator(timeout_s), device, timeout_s);
    } else {
      GDN_CHECK(!device.is_cuda(), "dist.backend mpi reduces CPU tensors but train.device is ",
                device.str(), ": use dist.backend nccl (or auto) on GPUs");
      c = make_mpi_communicator(timeout_s);
    }
  }
  c->set_timeout(timeout_s);
  return c;
}

}  // namespace gdn::dist
