// linear_cross_entropy as a custom Function built from the ordinary ops (so it runs on every
// device, meta included): per chunk c of rows, in fp32 (fp64 for fp64 inputs),
//   loss += n_c / n * CE(h_c W^T, t_c)        (n_c, n: scored rows in the chunk, in all)
//   dh_c  = d loss / d h_c,  dW += d loss / d W       by a local backward
// and backward(g) returns (g dh, g dW).
#include "src/ops/linear_cross_entropy.h"

#include <algorithm>

#include "src/autograd/function.h"
#include "src/ops/ops.h"

namespace gdn::ops {

namespace {

int64_t count_scored(const Tensor& targets, int64_t ignore_index) {
  if (targets.device().is_meta()) return targets.numel();  // no data: shape-only accounting
  int64_t n = 0;
  if (targets.device().is_cpu() && targets.is_contiguous()) {
    // Read in place: no temporary, so cpu and meta allocate exactly the same.
    if (targets.dtype() == DType::int64)
      for (int64_t i = 0; i < targets.numel(); ++i) n += targets.data<int64_t>()[i] != ignore_index;
    else if (targets.dtype() == DType::int32)
      for (int64_t i = 0; i < targets.numel(); ++i) n += targets.data<int32_t>()[i] != ignore_index;
    else
      GDN_FAIL("linear_cross_entropy: targets must be int32 or int64, got ", targets.str());
    return n;
  }
  for (double t : targets.to_vector()) n += int64_t(t) != ignore_index;
  return n;
}

class LinearCrossEntropy final : public autograd::Function {
 public:
  LinearCrossEntropy(int64_t ignore, int64_t chunk) : ignore_(ignore), chunk_(chunk) {}
  const char* name() const override { return "linear_cross_entropy"; }

  std::vector<Tensor> forward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    const Tensor &h = in[0], &w = in[1], &t = in[2];
    const DType acc = h.dtype() == DType::float64 ? DType::float64 : DType::float32;
    const int64_t n = h.size(0), total = std::max<int64_t>(count_scored(t, ignore_), 1);
    Tensor w_acc = cast(w, acc).detach().set_requires_grad(true);
    Tensor dh = empty(h.shape(), h.dtype(), h.device());
    Tensor loss = zeros({}, acc, h.device());
    for (int64_t r0 = 0; r0 < n; r0 += chunk_) {
      const int64_t r1 = std::min(n, r0 + chunk_);
      Tensor tc = contiguous(slice(t, 0, r0, r1));
      const int64_t nc = count_scored(tc, ignore_);
      Tensor hc = cast(contiguous(slice(h, 0, r0, r1)), acc).detach().set_requires_grad(true);
      {
        autograd::EnableGradGuard grad_on;
        Tensor lc = mul(cross_entropy(linear(hc, w_acc), tc, ignore_), double(nc) / double(total));
        lc.backward();
        loss = add(loss, lc.detach());
      }
      Tensor part = slice(dh, 0, r0, r1);
      copy_(part, hc.grad());
    }
    Tensor dw = w_acc.grad().defined() ? w_acc.grad() : zeros(w.shape(), acc, w.device());
    ctx.save_for_backward({dh, cast(dw, w.dtype())});
    return {loss};
  }

  std::vector<Tensor> backward(autograd::FunctionCtx& ctx,
                               const std::vector<Tensor>& grads) override {
    const Tensor &dh = ctx.saved()[0], &dw = ctx.saved()[1];
    // g is a scalar: scale the kept gradients by it.
    Tensor g = grads[0];
    Tensor gh = mul(dh, cast(g, dh.dtype())), gw = mul(dw, cast(g, dw.dtype()));
    return {ctx.needs_input_grad(0) ? gh : Tensor(), ctx.needs_input_grad(1) ? gw : Tensor(),
            Tensor()};
  }

 private:
  int64_t ignore_, chunk_;
};

}  // namespace

Tensor linear_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets,
                            int64_t ignore_index, int64_t chunk_rows) {
  GDN_CHECK(h.dim() == 2 && w.dim() == 2 && h.size(1) == w.size(1) && targets.dim() == 1 &&
                targets.size(0) == h.size(0),
            "linear_cross_entropy: h ", shape_str(h.shape()), " ([N, d]), w ", shape_str(w.shape()),
            " ([V, d]) and targets ", shape_str(targets.shape()), " ([N]) do not match");
  GDN_CHECK(is_floating(h.dtype()) && is_floating(w.dtype()),
            "linear_cross_entropy: h and w must be floating, got ", h.str(), " and ", w.str());
  // 32 MiB of fp32 logits per chunk (64 MiB with their gradient).
  if (chunk_rows <= 0) chunk_rows = std::max<int64_t>(1, (int64_t(32) << 20) / (4 * w.size(0)));
  return autograd::apply(std::make_shared<LinearCrossEntropy>(ignore_index, chunk_rows),
                         {h, w, targets})[0];
}

}  // namespace gdn::ops
