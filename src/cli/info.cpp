// `gdn info`: what this build can do (devices, CUDA, BLAS threads) and the optional libraries
// of the CUDA backend, each found or not, with its version and file or the reason.
#include <cstdio>

#include "kernels/cpu/gemm.h"
#include "kernels/dynamic_library.h"
#include "src/cli/commands.h"
#include "src/core/device.h"
#include "src/dist/nccl_communicator.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/optional_libraries.h"
#endif

namespace gdn::cli {

#if defined(GDN_WITH_CUDA)
namespace {

// One line per optional library: "cudnn       : 9.10.2 (/usr/lib/.../libcudnn.so.9)".
void print_library(const char* label, const LibraryInfo& info) {
  std::printf("%-12s: %s\n", label, info.summary().c_str());
}

}  // namespace
#endif

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the build, the devices and the optional libraries");
  cmd->callback([] {
    std::printf("gdn 0.1.0\n");
    std::printf("cpu threads : %d (OMP_NUM_THREADS)\n", cpu::num_threads());
    std::printf("cuda        : %s\n", cuda_compiled() ? "compiled in" : "not compiled in");
    std::printf("cuda devices: %d\n", cuda_device_count());
#if defined(GDN_WITH_CUDA)
    print_library("cudnn", cuda::cudnn_info());  // conv (GDN_CONV1D=cudnn), fused attention
    print_library("nccl", dist::nccl_info());    // dist.backend nccl
    print_library("nvrtc", cuda::nvrtc_info());  // cuDNN's runtime-compiled engines
#else
    std::printf("cudnn, nccl : not used (built without CUDA)\n");
#endif
  });
}

}  // namespace gdn::cli
