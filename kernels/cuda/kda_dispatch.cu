// The CUDA side of the Kimi Delta Attention registry (kernels/kda.h: cuda_kernels). `recurrent`
// runs kernels/cuda/kda_recurrent.cu. `chunked` has no CUDA kernels of its own yet: it runs the
// recurrent ones (the same residual, the same results to rounding) and says so once on stderr.
#include <cstdio>
#include <mutex>

#include "kernels/cuda/kda_cuda.h"

namespace gdn::kda {

namespace {

void note_chunked_runs_recurrent() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "gdn: kda chunked has no CUDA kernels yet; it runs the recurrent CUDA kernels\n");
  });
}

template <typename T>
void chunked_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                     void* stream) {
  note_chunked_runs_recurrent();
  cuda_detail::recurrent_forward<T>(p, in, out, stream);
}

template <typename T>
void chunked_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                      void* stream) {
  note_chunked_runs_recurrent();
  cuda_detail::recurrent_backward<T>(p, in, args, stream);
}

#define GDN_KDA_CUDA_KERNELS(FWD, BWD)                                                        \
  CudaKernels {                                                                               \
    {{&FWD<float>, &BWD<float>}, {&FWD<double>, &BWD<double>}, {&FWD<bf16>, &BWD<bf16>}},     \
        &cuda_detail::recurrent_forward_workspace, &cuda_detail::recurrent_backward_workspace \
  }

}  // namespace

const CudaKernels& cuda_kernels(Impl impl) {
  static const CudaKernels recurrent =
      GDN_KDA_CUDA_KERNELS(cuda_detail::recurrent_forward, cuda_detail::recurrent_backward);
  static const CudaKernels chunked = GDN_KDA_CUDA_KERNELS(chunked_forward, chunked_backward);
  return impl == Impl::chunked ? chunked : recurrent;
}

#undef GDN_KDA_CUDA_KERNELS

}  // namespace gdn::kda
