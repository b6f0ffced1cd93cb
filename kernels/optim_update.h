// Per-element optimizer updates shared by the CPU and CUDA kernels (kernels/{cpu,cuda}/adamw,
// sgd), so both devices compute the same expression in the same order (to the last bit only up
// to nvcc's contraction of a * b + c into one fused multiply-add). The host folds the
// step-dependent scalars (bias corrections, lr * weight decay) into a coefficient struct in
// fp64 once per tensor; the element math runs in the accumulator type A (fp32, fp64 for fp64).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/numeric.h"

namespace gdn::kern {

// AdamW's hyperparameters (torch.optim.AdamW's names; optim::AdamWOptions).
struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};
// One AdamW step of one tensor (torch.optim.AdamW, decoupled weight decay): the hyperparameters,
// the parameter group's decay, and `step`, the 1-based count of updates this tensor has had,
// including this one.
struct AdamWStep : AdamWHyper {
  double weight_decay = 0.0;
  int64_t step = 1;
};

// The step's scalars in the element type:
//   decay = 1 - lr*wd,  step_size = lr / (1 - b1^t),  bc2_sqrt = sqrt(1 - b2^t).
template <typename A>
struct AdamWCoeffs {
  A decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps;
};

template <typename A>
inline AdamWCoeffs<A> adamw_coeffs(const AdamWStep& s) {
  const double bc1 = 1.0 - std::pow(s.beta1, double(s.step));
  const double bc2 = 1.0 - std::pow(s.beta2, double(s.step));
  AdamWCoeffs<A> c;
  c.decay = A(1.0 - s.lr * s.weight_decay);
  c.beta1 = A(s.beta1);
  c.one_minus_beta1 = A(1.0 - s.beta1);
  c.beta2 = A(s.beta2);
  c.one_minus_beta2 = A(1.0 - s.beta2);
  c.step_size = A(s.lr / bc1);
  c.bc2_sqrt = A(std::sqrt(bc2));
  c.eps = A(s.eps);
  return c;
}

// p <- p (1 - lr wd);  m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;
// p <- p - step_size * m / (sqrt(v) / bc2_sqrt + eps)
// which is p - lr * mhat / (sqrt(vhat) + eps) with mhat = m / bc1, vhat = v / bc2, grouped as
// torch groups it (the denominator divides by sqrt(bc2), the numerator's 1/bc1 is in step_size).
template <typename A>
GDN_HD void adamw_update(A& p, A g, A& m, A& v, const AdamWCoeffs<A>& c) {
  p = p * c.decay;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  const A denom = std::sqrt(v) / c.bc2_sqrt + c.eps;
  p = p - c.step_size * (m / denom);
}

// SGD's hyperparameters (torch.optim.SGD's names; optim::SgdOptions). nesterov needs
// momentum > 0 and dampening == 0.
struct SgdHyper {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
};
// One SGD step of one tensor (torch.optim.SGD). `first` is true on the tensor's first update:
// the momentum buffer then starts as the gradient itself (no dampening), as in torch.
struct SgdStep : SgdHyper {
  double weight_decay = 0.0;
  bool first = false;
};

// d = g + wd p;  buf = first ? d : momentum buf + (1 - dampening) d;
// d = nesterov ? d + momentum buf : buf  (momentum > 0 only);  p <- p - lr d
template <typename A>
GDN_HD void sgd_update(A& p, A g, A* buf, A lr, A momentum, A one_minus_dampening, A wd,
                       bool nesterov, bool first) {
  A d = wd != A(0) ? g + wd * p : g;
  if (buf) {
    const A b = first ? d : momentum * *buf + one_minus_dampening * d;
    *buf = b;
    d = nesterov ? d + momentum * b : b;
  }
  p = p - lr * d;
}

}  // namespace gdn::kern
