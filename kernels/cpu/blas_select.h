// OpenBLAS's kernels for this CPU. A DYNAMIC_ARCH OpenBLAS picks its kernels from the CPU model
// at load time, and a model newer than the library (Debian 12's OpenBLAS 0.3.21 on Emerald or
// Granite Rapids) falls back to the 2004 "Prescott" SSE3 kernels: sgemm 4 to 5 times slower than
// the AVX-512 kernels the CPU runs. When that happened, and OPENBLAS_CORETYPE was not set by the
// user, gdn re-selects the kernels from the CPU's features (Cooperlake with AVX-512 BF16,
// SkylakeX with AVX-512 F and BW, Haswell with AVX2 and FMA) before any GEMM runs.
#pragma once
#include <string>

namespace gdn::cpu {

struct BlasKernels {
  std::string detected;  // what OpenBLAS chose at load time ("" when not OpenBLAS)
  std::string used;      // what runs now
  std::string why;       // how `used` was chosen, for the bench JSON and the banner
};

// The selection above, once per process (runs at load time; later calls return the result).
const BlasKernels& blas_kernels();

}  // namespace gdn::cpu
