// The MPI engine (internal to src/dist): CPU tensors over a duplicate of MPI_COMM_WORLD,
// initialised on first use (MPI_Init_thread, funneled: only the trainer's thread calls MPI).
#pragma once
#include <memory>

#include "src/dist/communicator.h"

namespace gdn::dist {

// A new communicator over all ranks (MPI_Comm_dup of MPI_COMM_WORLD); initialises MPI first.
std::shared_ptr<Communicator> make_mpi_communicator(double timeout_s);

namespace detail {
// Errors name the engine, the op and what is wrong with the tensor.
inline void check_tensor(const Communicator& c, const char* op, const Tensor& t) {
  GDN_CHECK(t.defined(), c.backend(), " ", op, ": undefined tensor");
  GDN_CHECK(t.device() == c.device(), c.backend(), " ", op, ": tensor on ", t.device().str(),
            ", the communicator works on ", c.device().str());
  GDN_CHECK(t.is_contiguous(), c.backend(), " ", op, ": tensor ", t.str(), " is not contiguous");
}
// The timeout message shared by the engines.
std::string timeout_message(const Communicator& c, const std::string& op, double waited_s);
}  // namespace detail

}  // namespace gdn::dist
