// CPU fused AdamW update: OpenMP over elements (static schedule; every element is independent,
// so the result does not depend on the thread count).
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/simd.h"
#include "kernels/trace_events.h"

#include <algorithm>

namespace gdn::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 15;  // below this, threads cost more than they save
}  // namespace

template <typename T>
GDN_CPU_CLONES void adamw_step(T* param, const T* grad, acc_t<T>* exp_avg, acc_t<T>* exp_avg_sq,
                               int64_t n, const kern::AdamWStep& step) {
  using A = acc_t<T>;
  const kern::AdamWCoeffs<A> c = kern::adamw_coeffs<A>(step);
#pragma omp parallel if (n >= kParallelMin)
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      A p = to_acc(param[i]);
      kern::adamw_update<A>(p, to_acc(grad[i]), exp_avg[i], exp_avg_sq[i], c);
      param[i] = from_acc<T>(p);
    }
  }
}

template <typename T>
GDN_CPU_CLONES void adamw_step_many(const std::vector<AdamWTensor<T>>& tensors) {
  using A = acc_t<T>;
  constexpr int64_t kBlock = 1 << 14;  // elements per work item: large enough to stream
  struct Block {
    size_t tensor;
    int64_t begin, end;
  };
  std::vector<Block> blocks;
  std::vector<kern::AdamWCoeffs<A>> coeffs;
  int64_t total = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    coeffs.push_back(kern::adamw_coeffs<A>(tensors[t].step));
    for (int64_t b = 0; b < tensors[t].n; b += kBlock)
      blocks.push_back({t, b, std::min(tensors[t].n, b + kBlock)});
    total += tensors[t].n;
  }
  const int64_t nblocks = int64_t(blocks.size());
#pragma omp parallel if (total >= kParallelMin)
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < nblocks; ++i) {
      const Block& b = blocks[size_t(i)];
      const AdamWTensor<T>& x = tensors[b.tensor];
      const kern::AdamWCoeffs<A>& c = coeffs[b.tensor];
      for (int64_t j = b.begin; j < b.end; ++j) {
        A p = to_acc(x.param[j]);
        kern::adamw_update<A>(p, to_acc(x.grad[j]), x.exp_avg[j], x.exp_avg_sq[j], c);
        x.param[j] = from_acc<T>(p);
      }
    }
  }
}

template void adamw_step_many<float>(const std::vector<AdamWTensor<float>>&);
template void adamw_step_many<double>(const std::vector<AdamWTensor<double>>&);
template void adamw_step<float>(float*, const float*, float*, float*, int64_t,
                                const kern::AdamWStep&);
template void adamw_step<double>(double*, const double*, double*, double*, int64_t,
                                 const kern::AdamWStep&);

}  // namespace gdn::cpu
