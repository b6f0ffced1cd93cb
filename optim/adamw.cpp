// AdamW: validates the hyper-parameters, allocates both moments per parameter, and dispatches
// the fused update to the parameter's device (none on meta).
#include "optim/adamw.h"

#include "kernels/cpu/adamw.h"
#include "src/ops/dispatch.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/adamw.h"
#endif

namespace gdn::optim {

namespace {
// fp32 moments for fp32 parameters, fp64 for fp64 (the kernels' acc_t).
DType moment_dtype(DType param) {
  return param == DType::float64 ? DType::float64 : DType::float32;
}
}  // namespace

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : Optimizer(std::move(groups), options.lr), options_(options) {
  GDN_CHECK(options.beta1 >= 0.0 && options.beta1 < 1.0, "AdamW: beta1 must be in [0, 1), got ",
            options.beta1);
  GDN_CHECK(options.beta2 >= 0.0 && options.beta2 < 1.0, "AdamW: beta2 must be in [0, 1), got ",
            options.beta2);
  GDN_CHECK(options.eps >= 0.0, "AdamW: eps must be >= 0, got ", options.eps);
  for (Slot& slot : slots()) {
    add_state(slot, "exp_avg", moment_dtype(slot.param.dtype()));
    add_state(slot, "exp_avg_sq", moment_dtype(slot.param.dtype()));
  }
}

namespace {
template <typename T>
void add_cpu_tensor(std::vector<cpu::AdamWTensor<T>>& out, Tensor& p, const Tensor& grad, Tensor& m,
                    Tensor& v, const kern::AdamWStep& s) {
  out.push_back({p.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), p.numel(), s});
}
}  // namespace

kern::AdamWStep AdamW::step_of(const Slot& slot, double lr, double weight_decay) const {
  kern::AdamWStep s;
  static_cast<kern::AdamWHyper&>(s) = options_;
  s.lr = lr;  // the schedule's
  s.weight_decay = weight_decay;
  s.step = slot.step;
  return s;
}

void AdamW::update_all(std::vector<Update>& updates) {
  std::vector<cpu::AdamWTensor<float>> f32;
  std::vector<cpu::AdamWTensor<double>> f64;
  for (Update& u : updates) {
    Slot& slot = *u.slot;
    if (!slot.param.device().is_cpu()) {
      update(slot, u.grad, u.lr, u.weight_decay);
      continue;
    }
    const kern::AdamWStep s = step_of(slot, u.lr, u.weight_decay);
    Tensor& m = slot.state[0].second;  // exp_avg (added first in the constructor)
    Tensor& v = slot.state[1].second;  // exp_avg_sq
    if (slot.param.dtype() == DType::float64)
      add_cpu_tensor(f64, slot.param, u.grad, m, v, s);
    else
      add_cpu_tensor(f32, slot.param, u.grad, m, v, s);
  }
  if (!f32.empty()) cpu::adamw_step_many(f32);
  if (!f64.empty()) cpu::adamw_step_many(f64);
}

void AdamW::update(Slot& slot, const Tensor& grad, double lr, double weight_decay) {
  const kern::AdamWStep s = step_of(slot, lr, weight_decay);
  Tensor& p = slot.param;
  Tensor& m = slot.state[0].second;  // exp_avg (added first in the constructor)
  Tensor& v = slot.state[1].second;  // exp_avg_sq
  const Device dev = p.device();
  const int64_t n = p.numel();
  // Parameters are float32 or float64 (checked when the optimizer is built).
  dispatch_dtype<TypeList<float, double>>(p.dtype(), "AdamW", [&](auto tag) {
    using T = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(dev, "AdamW",
                      cpu::adamw_step(p.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), n, s),
                      cuda::adamw_step(p.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), n, s,
                                       ops::detail::stream_of(dev)));
  });
}

}  // namespace gdn::optim
