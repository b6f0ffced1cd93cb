// OpenBLAS kernel selection (kernels/cpu/blas_select.h).
#include "kernels/cpu/blas_select.h"

#include <cstdlib>
#include <cstring>

// OpenBLAS exports these (DYNAMIC_ARCH builds): the chosen core's name, and the load-time
// selection, which re-reads OPENBLAS_CORETYPE. Weak: another BLAS simply lacks them.
extern "C" {
char* openblas_get_corename(void) __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace gdn::cpu {

namespace {

// OpenBLAS targets without AVX2: chosen for a CPU that has it only when the model is unknown.
bool pre_avx2_target(const std::string& core) {
  for (const char* old : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge",
                          "Katmai", "Coppermine", "Northwood", "Banias", "Atom"})
    if (core == old) return true;
  return false;
}

// The OpenBLAS target matching this CPU's features, or "" when it has no AVX2 + FMA.
std::string target_for_this_cpu() {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return "Cooperlake";
  if (avx512) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

BlasKernels select() {
  BlasKernels k;
  if (!openblas_get_corename) return k;
  k.detected = k.used = openblas_get_corename();
  if (std::getenv("OPENBLAS_CORETYPE")) {
    k.why = "OPENBLAS_CORETYPE set by the user";
    return k;
  }
  const std::string target = target_for_this_cpu();
  if (!pre_avx2_target(k.detected) || target.empty() || !gotoblas_dynamic_init ||
      !gotoblas_dynamic_quit) {
    k.why = "OpenBLAS's own detection";
    return k;
  }
  // No GEMM has run yet (load time), so no BLAS thread holds the old kernels.
  setenv("OPENBLAS_CORETYPE", target.c_str(), 0);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");  // child processes detect for themselves
  k.used = openblas_get_corename();
  k.why = "OpenBLAS chose " + k.detected + " for an unknown CPU model; " + target +
          " selected from the CPU's features";
  return k;
}

}  // namespace

const BlasKernels& blas_kernels() {
  static const BlasKernels k = select();
  return k;
}

}  // namespace gdn::cpu
