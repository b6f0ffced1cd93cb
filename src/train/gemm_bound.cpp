#include "src/train/gemm_bound.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "layers/linear.h"
#include "src/autograd/node.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include "src/core/cuda/cuda_context.h"
#endif

namespace gdn::train {

namespace {

void sync(Device d) {
#if defined(GDN_WITH_CUDA)
  if (d.is_cuda()) cuda::synchronize(d.index);
#else
  (void)d;
#endif
}

// Seconds of the best of `repeats` calls of fn (after one untimed call).
template <class F>
double best_seconds(Device d, int repeats, const F& fn) {
  fn();
  sync(d);
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    sync(d);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

GemmBound measure_gemm_bound(const nn::CausalLM& model, int64_t rows, int64_t micro_batches,
                             Device device, DType dtype) {
  // Weight shapes [out, in] and how many Linears have each.
  std::map<std::pair<int64_t, int64_t>, int64_t> shapes;
  for (const nn::Module* m : model.modules())
    if (const auto* linear = dynamic_cast<const nn::Linear*>(m))
      ++shapes[{linear->weight.size(0), linear->weight.size(1)}];
  if (!model.lm_head) {  // tied: the head's GEMMs run on the embedding
    const Tensor& w = model.lm_head_weight();
    ++shapes[{w.size(0), w.size(1)}];
  }
  autograd::NoGradGuard no_grad;
  GemmBound b;
  for (const auto& [shape, count] : shapes) {
    const auto [out, in] = shape;
    const Tensor x = ops::randn({rows, in}, dtype, device);
    const Tensor dy = ops::randn({rows, out}, dtype, device);
    const Tensor w = ops::randn({out, in}, dtype, device);
    const double s = best_seconds(device, 3, [&] {
      ops::linear(x, w);                         // y = x W^T
      ops::matmul(dy, w);                        // dx = dy W
      ops::matmul(ops::transpose(dy, 0, 1), x);  // dW = dy^T x
    });
    const double n = double(count * micro_batches);
    b.ms += 1e3 * s * n;
    b.gflop += 3 * 2e-9 * double(rows) * double(out) * double(in) * n;
    b.gemms += 3 * count * micro_batches;
  }
  return b;
}

}  // namespace gdn::train
