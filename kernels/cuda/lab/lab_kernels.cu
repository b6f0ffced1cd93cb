// The `lab` variant's launches: LabBlock (lab_block.cuh) on the fused kernels' launch path, with
// the library's plan (Problem::fused_vt forces the V tile).
#include <stdexcept>

#include "kernels/cuda/gdr_common.cuh"
#include "kernels/cuda/lab/lab_block.cuh"
#include "kernels/cuda/lab/lab_kernels.h"

namespace gdn::gdr::lab {

template <typename T>
void lab_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                 void* stream) {
  const fused::Plan pl = cuda_detail::fused_plan(p, false, sizeof(T));
  if (!pl.ok) throw std::invalid_argument("lab forward: " + pl.why);
  const fused::ForwardArgs<T> args{in.q,  in.k,  in.v,   in.g,        in.beta,
                                   in.h0, out.o, out.ht, out.residual};
  fused::launch_forward<LabBlock, T>(pl, fused::dims_of(p, pl.vt, pl.sub), args,
                                     static_cast<cudaStream_t>(stream));
}

template <typename T>
void lab_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& a, void* stream) {
  const fused::Plan pl = cuda_detail::fused_plan(p, true, sizeof(T));
  if (!pl.ok) throw std::invalid_argument("lab backward: " + pl.why);
  const fused::BackwardArgs<T> args{in.q,  in.k,  in.v,       in.g,        in.beta,
                                    a.d_o, a.dht, a.residual, a.workspace, a.dq,
                                    a.dk,  a.dv,  a.dg,       a.dbeta,     a.dh0};
  fused::launch_backward<LabBlock, T>(pl, fused::dims_of(p, pl.vt, pl.sub), args,
                                      static_cast<cudaStream_t>(stream));
}

template void lab_forward<float>(const Problem&, const Inputs<float>&, const ForwardOutputs<float>&,
                                 void*);
template void lab_forward<bf16>(const Problem&, const Inputs<bf16>&, const ForwardOutputs<bf16>&,
                                void*);
template void lab_backward<float>(const Problem&, const Inputs<float>&, const BackwardArgs<float>&,
                                  void*);
template void lab_backward<bf16>(const Problem&, const Inputs<bf16>&, const BackwardArgs<bf16>&,
                                 void*);

}  // namespace gdn::gdr::lab
