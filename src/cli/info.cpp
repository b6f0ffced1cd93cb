// `gdn info`: what this build can do (devices, CUDA, BLAS threads).
#include <cstdio>

#include "kernels/cpu/gemm.h"
#include "src/cli/commands.h"
#include "src/core/device.h"

namespace gdn::cli {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the build and the devices gdn can use");
  cmd->callback([] {
    std::printf("gdn 0.1.0\n");
    std::printf("cpu threads : %d (OMP_NUM_THREADS)\n", cpu::num_threads());
    std::printf("cuda        : %s\n", cuda_compiled() ? "compiled in" : "not compiled in");
    std::printf("cuda devices: %d\n", cuda_device_count());
  });
}

}  // namespace gdn::cli
