// The Tensor methods that run ops or the autograd engine: backward, to_vector, item. They are
// declared with Tensor in src/core/tensor.h and defined here, in the ops library, so that the
// core library depends on nothing above it.
#include "src/autograd/node.h"
#include "src/core/tensor.h"
#include "src/ops/ops.h"

namespace gdn {

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  Tensor g = grad;
  if (!g.defined()) {
    GDN_CHECK(numel() == 1, "backward() without a gradient needs a single-element tensor, got ",
              shape_str(shape()));
    g = ops::ones(shape(), dtype(), device());
  }
  autograd::run_backward({*this}, {g}, retain_graph);
}

std::vector<double> Tensor::to_vector() const {
  GDN_CHECK(!device().is_meta(), "to_vector() on a meta tensor (it has no data)");
  Tensor host = ops::cast(ops::to_device(detach(), Device::cpu()), DType::float64);
  host = ops::contiguous(host);
  const double* p = host.data<double>();
  return std::vector<double>(p, p + host.numel());
}

double Tensor::item() const {
  GDN_CHECK(numel() == 1, "item() needs a single-element tensor, got ", shape_str(shape()));
  return to_vector()[0];
}

}  // namespace gdn
