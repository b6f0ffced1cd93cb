// SGD: validates the hyper-parameters, allocates the momentum buffers (momentum > 0), and
// dispatches the fused update to the parameter's device (none on meta).
#include "optim/sgd.h"

#include "kernels/cpu/sgd.h"
#include "src/ops/dispatch.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/sgd.h"
#endif

namespace gdn::optim {

Sgd::Sgd(std::vector<ParamGroup> groups, const SgdOptions& options)
    : Optimizer(std::move(groups), options.lr), options_(options) {
  GDN_CHECK(options.momentum >= 0.0, "SGD: momentum must be >= 0, got ", options.momentum);
  GDN_CHECK(options.dampening >= 0.0 && options.dampening <= 1.0,
            "SGD: dampening must be in [0, 1], got ", options.dampening);
  GDN_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
            "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ", options.momentum,
            " and dampening ", options.dampening);
  if (options.momentum > 0.0) {
    for (Slot& slot : slots())
      add_state(slot, "momentum_buffer",
                slot.param.dtype() == DType::float64 ? DType::float64 : DType::float32);
  }
}

void Sgd::update(Slot& slot, const Tensor& grad, double lr, double weight_decay) {
  kern::SgdStep s;
  static_cast<kern::SgdHyper&>(s) = options_;
  s.lr = lr;  // the schedule's
  s.weight_decay = weight_decay;
  s.first = slot.step == 1;
  Tensor& p = slot.param;
  Tensor buf = slot.state.empty() ? Tensor() : slot.state[0].second;
  const Device dev = p.device();
  const int64_t n = p.numel();
  // Parameters are float32 or float64 (checked when the optimizer is built).
  dispatch_dtype<TypeList<float, double>>(p.dtype(), "SGD", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* b = buf.defined() ? buf.data<T>() : nullptr;
    GDN_RUN_ON_DEVICE(
        dev, "SGD", cpu::sgd_step(p.data<T>(), grad.data<T>(), b, n, s),
        cuda::sgd_step(p.data<T>(), grad.data<T>(), b, n, s, ops::detail::stream_of(dev)));
  });
}

}  // namespace gdn::optim
