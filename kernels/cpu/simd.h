// The CPU kernels' loops compiled three times, for AVX-512 (with FMA), AVX2 and the x86-64
// baseline, with the best one the CPU runs chosen once at load time (GCC's
// target_clones, resolved as an ifunc; OpenMP's outlined loop bodies are cloned with them). A
// binary built on any machine runs on every x86-64 and still vectorises 16 floats wide where the
// CPU can. Put GDN_CPU_CLONES before a kernel function that holds its loops (a lambda or inline
// helper inlined into it is compiled with it; one that owns an `omp parallel` is not, and needs
// its own). Feature clones, not `arch=` ones: GCC inlines plain inline helpers (fast_exp.h) only
// into callers of the same arch.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && \
    !defined(GDN_NO_CPU_CLONES)
#define GDN_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GDN_CPU_CLONES
#endif

// GDN_CPU_CLONES for a kernel whose loops sit in helpers across several headers (the chunk steps
// of the delta-rule kernels): `flatten` inlines the whole call tree into each clone, so every
// helper's loops are compiled for that clone's instruction set (calls into other files, BLAS
// among them, stay calls).
#if defined(__GNUC__) && !defined(__CUDACC__)
#define GDN_CPU_CLONES_FLAT GDN_CPU_CLONES __attribute__((flatten))
#else
#define GDN_CPU_CLONES_FLAT GDN_CPU_CLONES
#endif
