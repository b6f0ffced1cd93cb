// Gradient accumulation helper: in-place scaling of the accumulated grads.
#include "optim/grad_accum.h"

#include "src/core/allocator.h"
#include "src/ops/ops.h"

namespace gdn::optim {

void scale_grads(const std::vector<Tensor>& params, double factor) {
  for (const Tensor& p : params) {
    GDN_CHECK(p.defined(), "scale_grads: undefined parameter tensor");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.is_contiguous()) {
      MemoryCategoryScope scope(MemCategory::grad);
      g = ops::contiguous_copy(g);
      Tensor(p).set_grad(g);
    }
    ops::mul_(g, factor);
  }
}

}  // namespace gdn::optim
