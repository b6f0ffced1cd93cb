// Reductions over dims: sum, mean, max; and sum_to (the adjoint of broadcasting).
//   d sum = broadcast of g;  d mean = broadcast of g / n;  d max = g at the arg-max, else 0.
#include <algorithm>

#include "kernels/cpu/reduce.h"
#include "src/autograd/node.h"
#include "src/ops/dispatch.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/reduce.h"
#endif

namespace gdn::ops {

using detail::stream_of;

namespace {

std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim,
                                    const char* op) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim));
  std::sort(out.begin(), out.end());
  GDN_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op, ": repeated dim");
  return out;
}

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < int64_t(in.size()); ++i) {
    bool reduced = std::binary_search(dims.begin(), dims.end(), i);
    if (!reduced)
      out.push_back(in[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// Arranges `a` as contiguous [outer, r, inner] with the reduced dims in the middle.
struct Arranged {
  Tensor x;
  int64_t outer = 1, r = 1, inner = 1;
};

Arranged arrange(const Tensor& a, const std::vector<int64_t>& dims) {
  Arranged out;
  const int64_t nd = a.dim();
  bool consecutive = dims.empty() || dims.back() - dims.front() + 1 == int64_t(dims.size());
  if (consecutive && !dims.empty()) {
    out.x = contiguous(a.detach());
    for (int64_t i = 0; i < dims.front(); ++i) out.outer *= a.size(i);
    for (int64_t d : dims) out.r *= a.size(d);
    for (int64_t i = dims.back() + 1; i < nd; ++i) out.inner *= a.size(i);
    return out;
  }
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < nd; ++i)
    if (!std::binary_search(dims.begin(), dims.end(), i)) perm.push_back(i);
  for (int64_t d : dims) perm.push_back(d);
  out.x = contiguous(permute(a.detach(), perm));
  for (int64_t i = 0; i < nd - int64_t(dims.size()); ++i) out.outer *= a.size(perm[i]);
  for (int64_t d : dims) out.r *= a.size(d);
  return out;
}

Tensor reduce_raw(cpu::Reduce op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim,
                  Tensor* argmax, const char* name) {
  detail::check_floating(name, a);
  Shape out_shape = reduced_shape(a.shape(), dims, keepdim);
  Arranged ar = arrange(a, dims);
  const Device dev = a.device();
  Tensor out = empty(out_shape, a.dtype(), dev);
  if (argmax) *argmax = empty(out_shape, DType::int64, dev);
  int64_t* arg = argmax ? argmax->data<int64_t>() : nullptr;
  dispatch_dtype<FloatingTypes>(a.dtype(), name, [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(
        dev, name,
        cpu::reduce(op, ar.x.data<scalar_t>(), ar.outer, ar.r, ar.inner, out.data<scalar_t>(), arg),
        cuda::reduce(op, ar.x.data<scalar_t>(), ar.outer, ar.r, ar.inner, out.data<scalar_t>(), arg,
                     stream_of(dev)));
  });
  return out;
}

// g (reduced shape) broadcast back to the input shape.
Tensor expand_back(const Tensor& g, const Shape& in_shape, const std::vector<int64_t>& dims,
                   bool keepdim) {
  Tensor gk = g;
  if (!keepdim) {
    Shape ks = reduced_shape(in_shape, dims, true);
    gk = reshape(g, ks);
  }
  return expand(gk, in_shape);
}

}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim) {
  auto dims = normalize_dims(dims_in, a.dim(), "sum");
  if (dims.empty()) return a;
  Tensor out = reduce_raw(cpu::Reduce::sum, a, dims, keepdim, nullptr, "sum");
  if (autograd::needs_grad({a})) {
    autograd::record("sum", {a}, out, {},
                     [dims, keepdim, shape = a.shape()](const std::vector<Tensor>& g,
                                                        const std::vector<Tensor>&) {
                       return std::vector<Tensor>{expand_back(g[0], shape, dims, keepdim)};
                     });
  }
  return out;
}

Tensor sum(const Tensor& a) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < a.dim(); ++i) all.push_back(i);
  if (all.empty()) return a;
  return sum(a, all, false);
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  auto nd = normalize_dims(dims, a.dim(), "mean");
  int64_t n = 1;
  for (int64_t d : nd) n *= a.size(d);
  return mul(sum(a, dims, keepdim), 1.0 / double(std::max<int64_t>(n, 1)));
}

Tensor mean(const Tensor& a) {
  return mul(sum(a), 1.0 / double(std::max<int64_t>(a.numel(), 1)));
}

Tensor max(const Tensor& a, int64_t dim, bool keepdim) {
  const int64_t d = wrap_dim(dim, a.dim());
  GDN_CHECK(a.size(d) > 0, "max over an empty dim of ", a.str());
  Tensor argmax;
  Tensor out = reduce_raw(cpu::Reduce::max, a, {d}, keepdim, &argmax, "max");
  if (autograd::needs_grad({a})) {
    autograd::record(
        "max", {a}, out, {argmax},
        [d, shape = a.shape(), dtype = a.dtype()](const std::vector<Tensor>& g,
                                                  const std::vector<Tensor>& s) {
          int64_t outer = 1, r = shape[d], inner = 1;
          for (int64_t i = 0; i < d; ++i) outer *= shape[i];
          for (int64_t i = d + 1; i < int64_t(shape.size()); ++i) inner *= shape[i];
          Tensor gc = contiguous(g[0]);
          const Device dev = g[0].device();
          Tensor dx = empty(shape, dtype, dev);
          dispatch_dtype<FloatingTypes>(dtype, "max backward", [&](auto tag) {
            using scalar_t = typename decltype(tag)::type;
            GDN_RUN_ON_DEVICE(
                dev, "max backward",
                cpu::reduce_max_backward(gc.data<scalar_t>(), s[0].data<int64_t>(), outer, r, inner,
                                         dx.data<scalar_t>()),
                cuda::reduce_max_backward(gc.data<scalar_t>(), s[0].data<int64_t>(), outer, r,
                                          inner, dx.data<scalar_t>(), stream_of(dev)));
          });
          return std::vector<Tensor>{dx};
        });
  }
  return out;
}

Tensor sum_to(const Tensor& a, const Shape& shape) {
  if (a.shape() == shape) return a;
  const int64_t lead = a.dim() - int64_t(shape.size());
  GDN_CHECK(lead >= 0, "sum_to: cannot reduce ", shape_str(a.shape()), " to ", shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < a.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else {
      int64_t want = shape[i - lead];
      GDN_CHECK(want == a.size(i) || want == 1, "sum_to: cannot reduce ", shape_str(a.shape()),
                " to ", shape_str(shape));
      if (want == 1 && a.size(i) != 1) dims.push_back(i);
    }
  }
  Tensor s = dims.empty() ? a : sum(a, dims, true);
  return reshape(s, shape);
}

}  // namespace gdn::ops
