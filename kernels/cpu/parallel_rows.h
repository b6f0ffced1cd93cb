// The row loop of the CPU kernels that compute each row (or element, or block of columns) on its
// own: fn(i) for every i < n, split over the threads in static blocks when `parallel`, so the bits
// do not depend on the thread count. It owns the `omp parallel`, so it is cloned as the kernels
// are (kernels/cpu/simd.h): fn, a lambda inlined here, is compiled and vectorised with each clone.
// `name` names the workers in a trace (the kernel's __func__). Mark fn GDN_ROW_INLINE: a large
// one (fp16's, say) would otherwise stay out of line, compiled for the baseline ISA.
#pragma once
#include <cstdint>

#include "kernels/cpu/simd.h"
#include "kernels/trace_events.h"

// After a row function's parameter list: `[&](int64_t i) GDN_ROW_INLINE { ... }`.
#define GDN_ROW_INLINE __attribute__((always_inline))

namespace gdn::cpu {

template <typename Fn>
GDN_CPU_CLONES void parallel_rows(int64_t n, bool parallel, const char* name, const Fn& fn) {
#pragma omp parallel if (parallel)
  {
    GDN_TRACE_WORKER(name);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) fn(i);
  }
}

// The same with scratch of each thread's own: fn(i, scratch), scratch = make_scratch() once a
// thread.
template <typename MakeScratch, typename Fn>
GDN_CPU_CLONES void parallel_rows(int64_t n, bool parallel, const char* name,
                                  const MakeScratch& make_scratch, const Fn& fn) {
#pragma omp parallel if (parallel)
  {
    GDN_TRACE_WORKER(name);
    auto scratch = make_scratch();
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) fn(i, scratch);
  }
}

}  // namespace gdn::cpu
