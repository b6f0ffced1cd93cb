// The optional vendor libraries of the CUDA backend (cuDNN, NVRTC), opened at run time on first
// use (kernels/dynamic_library.h): whether each is there, its file and version, or why not. A plain
// header: `gdn info` and the attention op's choice use it without cuDNN's types.
#pragma once
#include <string>

#include "kernels/dynamic_library.h"

namespace gdn::cuda {

// cuDNN 9 (libcudnn.so.9): conv (GDN_CONV1D=cudnn) needs 9.0, fused attention 9.0, its sliding
// window (a diagonal band) 9.6.
constexpr int kCudnnMinVersion = 90000;
constexpr int kCudnnBandMinVersion = 90600;

// cuDNN: opened (once, thread-safe) by the first call of this or kernels/cuda/cudnn_api.h.
LibraryInfo cudnn_info();
// NVRTC, which cuDNN's runtime-compiled engines and its frontend load themselves; reported so
// that a failing cuDNN graph can be told apart from a missing compiler.
LibraryInfo nvrtc_info();

// Why cuDNN cannot serve a feature needing `min_version` (e.g. "cuDNN 9.1.0 is older than the
// 9.6.0 that ... needs"); "" when it can. `feature` names it in the message.
std::string cudnn_missing_for(const char* feature, int min_version);

}  // namespace gdn::cuda
