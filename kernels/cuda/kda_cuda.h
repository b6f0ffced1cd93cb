// Kimi Delta Attention on CUDA: the kernels behind the registry's cuda entries
// (kernels/cuda/kda_recurrent.cu, kernels/cuda/kda_chunked.cu) and their workspaces in acc elements
// for inputs of in_bytes bytes (the head of a workspace holds the packed-sequence table the kernels
// read).
#pragma once
#include <cstdint>

#include "kernels/kda.h"

namespace gdn::kda::cuda_detail {

int64_t recurrent_forward_workspace(const Problem& p, int64_t in_bytes);
int64_t recurrent_backward_workspace(const Problem& p, int64_t in_bytes);
template <typename T>
void recurrent_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                       void* stream);
template <typename T>
void recurrent_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                        void* stream);

int64_t chunked_forward_workspace(const Problem& p, int64_t in_bytes);
int64_t chunked_backward_workspace(const Problem& p, int64_t in_bytes);
template <typename T>
void chunked_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                     void* stream);
template <typename T>
void chunked_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                      void* stream);

}  // namespace gdn::kda::cuda_detail
