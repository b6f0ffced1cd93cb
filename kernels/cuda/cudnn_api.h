// The cuDNN functions gdn calls, bound at run time from libcudnn.so.9 (kernels/dynamic_library.h):
// no gdn binary links cuDNN, so a machine without it runs everything else (conv on the direct
// kernel, attention on the flash kernel) and a request for cuDNN is refused naming what was found.
// cuDNN's C++ frontend (attention_cudnn.cu) loads its own functions from the same handle.
#pragma once
#include <cudnn.h>

#include "kernels/cuda/optional_libraries.h"

namespace gdn::cuda {

// Every cuDNN function of conv_cudnn.cu and attention_cudnn.cu.
#define GDN_CUDNN_FUNCTIONS(X)                          \
  X(cudnnGetVersion)                                    \
  X(cudnnGetErrorString)                                \
  X(cudnnGetLastErrorString)                            \
  X(cudnnCreate)                                        \
  X(cudnnSetStream)                                     \
  X(cudnnCreateTensorDescriptor)                        \
  X(cudnnCreateFilterDescriptor)                        \
  X(cudnnCreateConvolutionDescriptor)                   \
  X(cudnnDestroyTensorDescriptor)                       \
  X(cudnnDestroyFilterDescriptor)                       \
  X(cudnnDestroyConvolutionDescriptor)                  \
  X(cudnnSetTensor4dDescriptor)                         \
  X(cudnnSetFilter4dDescriptor)                         \
  X(cudnnSetConvolution2dDescriptor)                    \
  X(cudnnSetConvolutionGroupCount)                      \
  X(cudnnSetConvolutionMathType)                        \
  X(cudnnGetTensorNdDescriptor)                         \
  X(cudnnGetFilterNdDescriptor)                         \
  X(cudnnGetConvolutionGroupCount)                      \
  X(cudnnGetConvolution2dDescriptor)                    \
  X(cudnnGetConvolution2dForwardOutputDim)              \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount)        \
  X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount)   \
  X(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount) \
  X(cudnnGetConvolutionForwardAlgorithm_v7)             \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)        \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)      \
  X(cudnnGetConvolutionForwardWorkspaceSize)            \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize)       \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize)     \
  X(cudnnConvolutionForward)                            \
  X(cudnnConvolutionBackwardData)                       \
  X(cudnnConvolutionBackwardFilter)

// Pointers named as the functions: `cudnn("...").cudnnCreate(&h)`.
struct CudnnApi {
#define GDN_CUDNN_POINTER(fn) decltype(&::fn) fn = nullptr;
  GDN_CUDNN_FUNCTIONS(GDN_CUDNN_POINTER)
#undef GDN_CUDNN_POINTER
  void* handle = nullptr;  // the dlopen handle (the frontend binds its own functions from it)
  int version = 0;         // cudnnGetVersion(): major * 10000 + minor * 100 + patch
};

// The process's cuDNN, opened on first use; null when cudnn_info() says it is not available.
const CudnnApi* cudnn_api_or_null();

// The same for a caller that needs it (`what`: "causal_conv1d (cuDNN)"): throws
// std::runtime_error naming `what`, what was found and what is needed when cuDNN is unavailable.
const CudnnApi& cudnn(const char* what);

}  // namespace gdn::cuda
