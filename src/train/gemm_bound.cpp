#include "src/train/gemm_bound.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>
#include <vector>

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

// Seconds of one call of fn, the device synchronised.
template <class F>
double seconds(Device d, const F& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  sync(d);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  struct Operands {
    int64_t out, in, count;
    Tensor x, dy, w;
    double best = 1e30;
  };
  std::vector<Operands> all;
  for (const auto& [shape, count] : shapes)
    all.push_back({shape.first, shape.second, count,
                   ops::randn({rows, shape.second}, dtype, device),
                   ops::randn({rows, shape.first}, dtype, device),
                   ops::randn({shape.first, shape.second}, dtype, device)});
  // Rounds over every shape, the best of each: a moment of load elsewhere slows one round of one
  // shape, not the bound. The first round warms up and is not counted.
  constexpr int kRounds = 6;
  for (int r = 0; r < kRounds; ++r)
    for (Operands& o : all) {
      const double s = seconds(device, [&] {
        ops::linear(o.x, o.w);                         // y = x W^T
        ops::matmul(o.dy, o.w);                        // dx = dy W
        ops::matmul(ops::transpose(o.dy, 0, 1), o.x);  // dW = dy^T x
      });
      if (r > 0) o.best = std::min(o.best, s);
    }
  GemmBound b;
  for (const Operands& o : all) {
    const double n = double(o.count * micro_batches);
    b.ms += 1e3 * o.best * n;
    b.gflop += 3 * 2e-9 * double(rows) * double(o.out) * double(o.in) * n;
    b.gemms += 3 * o.count * micro_batches;
  }
  return b;
}

}  // namespace gdn::train
