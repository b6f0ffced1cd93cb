// Global-norm clipping: per-tensor fp64 sums of squares on each tensor's device
// (CUDA sums stay on the device until one copy per device at the end), added in list order.
#include "optim/clip.h"

#include <cmath>
#include <map>

#include "kernels/cpu/grad_norm.h"
#include "optim/grad_accum.h"
#include "src/core/allocator.h"
#include "src/ops/dispatch.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/grad_norm.h"
#endif

namespace gdn::optim {

namespace {

#if defined(GDN_WITH_CUDA)
// The sums of one CUDA device: one fp64 slot per parameter, and the kernel's workspace.
struct DeviceSums {
  Tensor sums, workspace;
  std::vector<size_t> indices;  // which parameters wrote a slot
};
#endif

}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
  std::vector<double> sums(params.size(), 0.0);
#if defined(GDN_WITH_CUDA)
  std::map<int, DeviceSums> on_cuda;
  auto cuda_slot = [&](Device dev, size_t i) -> DeviceSums& {
    DeviceSums& d = on_cuda[dev.index];
    if (!d.sums.defined()) {
      MemoryCategoryScope scope(MemCategory::workspace);
      d.sums = ops::empty({int64_t(params.size())}, DType::float64, dev);
      d.workspace = ops::empty({cuda::kSumSquaresWorkspace}, DType::float64, dev);
    }
    d.indices.push_back(i);
    return d;
  };
#endif
  for (size_t i = 0; i < params.size(); ++i) {
    GDN_CHECK(params[i].defined(), "grad_norm: parameter ", i, " is an undefined tensor");
    Tensor g = params[i].grad();
    if (!g.defined() || g.device().is_meta()) continue;
    if (!g.is_contiguous()) {
      MemoryCategoryScope scope(MemCategory::temp);
      g = ops::contiguous_copy(g);
    }
    const Device dev = g.device();
    dispatch_dtype<FloatingTypes>(g.dtype(), "grad_norm", [&](auto tag) {
      using scalar_t = typename decltype(tag)::type;
      GDN_RUN_ON_DEVICE(
          dev, "grad_norm", cpu::sum_squares(g.data<scalar_t>(), g.numel(), &sums[i]), {
            DeviceSums& d = cuda_slot(dev, i);
            cuda::sum_squares(g.data<scalar_t>(), g.numel(), d.workspace.data<double>(),
                              d.sums.data<double>() + i, ops::detail::stream_of(dev));
          });
    });
  }
#if defined(GDN_WITH_CUDA)
  for (auto& [index, d] : on_cuda) {
    const std::vector<double> host = d.sums.to_vector();  // waits for the kernels
    for (size_t i : d.indices) sums[i] = host[i];
  }
#endif
  double total = 0.0;
  for (double s : sums) total += s;
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  GDN_CHECK(max_norm > 0.0, "clip_grad_norm: max_norm must be > 0, got ", max_norm,
            " (use grad_norm to measure without clipping)");
  const double norm = grad_norm(params);
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);  // torch's epsilon
  if (coef < 1.0) scale_grads(params, coef);
  return norm;
}

}  // namespace gdn::optim
