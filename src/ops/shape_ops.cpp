// Shape ops (views where possible), copies, casts and device moves, with their backward:
// views map the gradient back through the inverse view; cast and to_device move it back.
#include <algorithm>

#include "kernels/cpu/elementwise.h"
#include "src/autograd/node.h"
#include "src/ops/dispatch.h"
#include "src/ops/layout.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/elementwise.h"
#endif

namespace gdn::ops {

using detail::stream_of;

Shape infer_shape(const Shape& shape, int64_t numel) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      GDN_CHECK(infer < 0, "shape ", shape_str(shape), " has more than one -1");
      infer = int64_t(i);
    } else {
      GDN_CHECK(shape[i] >= 0, "bad dimension in shape ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    GDN_CHECK(known > 0 && numel % known == 0, "cannot view ", numel, " elements as ",
              shape_str(shape));
    out[size_t(infer)] = numel / known;
  }
  GDN_CHECK(shape_numel(out) == numel, "cannot view ", numel, " elements as ", shape_str(shape));
  return out;
}

namespace {

// A view with autograd: backward maps g through `back`.
Tensor make_view_op(const char* name, const Tensor& a, const Shape& shape, const Strides& strides,
                    int64_t offset, std::function<Tensor(const Tensor&)> back) {
  Tensor out = Tensor::make_view(a, shape, strides, offset);
  if (autograd::needs_grad({a}))
    autograd::record(name, {a}, out, {},
                     [back](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
                       return std::vector<Tensor>{back(g[0])};
                     });
  return out;
}

// Raw copy between any two tensors of the same shape (dtype conversion, any device pair).
void copy_raw(Tensor& dst, const Tensor& src) {
  GDN_CHECK(dst.shape() == src.shape(), "copy: shapes ", shape_str(dst.shape()), " and ",
            shape_str(src.shape()));
  const Device dd = dst.device(), sd = src.device();
  if (dd.is_meta()) return;
  GDN_CHECK(!sd.is_meta(), "copy from a meta tensor (it has no data) to ", dd.str());
  if (dst.numel() == 0) return;
  if (dd == sd) {
    auto L = detail::copy_layout(dst, src);
    dispatch_dtype<AllTypes>(src.dtype(), "copy", [&](auto tag) {
      using scalar_t = typename decltype(tag)::type;
      using S = scalar_t;
      dispatch_dtype<AllTypes>(dst.dtype(), "copy", [&](auto tag1) {
        using scalar_t = typename decltype(tag1)::type;
        GDN_RUN_ON_DEVICE(
            dd, "copy", cpu::copy_strided(L, src.data<S>(), dst.data<scalar_t>()),
            cuda::copy_strided(L, src.data<S>(), dst.data<scalar_t>(), stream_of(dd)));
      });
    });
    return;
  }
#if defined(GDN_WITH_CUDA)
  // Across devices: stage a contiguous buffer of dst's dtype on the source side, then memcpy.
  Tensor staged = src;
  if (!(src.is_contiguous() && src.dtype() == dst.dtype())) {
    staged = empty(src.shape(), dst.dtype(), sd);
    copy_raw(staged, src);
  }
  Tensor target = dst.is_contiguous() ? dst : empty(dst.shape(), dst.dtype(), dd);
  if (sd.is_cpu() && dd.is_cuda()) {
    cuda::memcpy_h2d(target.data_ptr(), staged.data_ptr(), target.nbytes(), dd.index);
  } else if (sd.is_cuda() && dd.is_cpu()) {
    cuda::memcpy_d2h(target.data_ptr(), staged.data_ptr(), target.nbytes(), sd.index);
  } else {
    cuda::memcpy_d2d(target.data_ptr(), dd.index, staged.data_ptr(), sd.index, target.nbytes());
  }
  if (!target.same(dst)) copy_raw(dst, target);
#else
  GDN_FAIL("copy from ", sd.str(), " to ", dd.str(), ": gdn was built without CUDA");
#endif
}

}  // namespace

void copy_(Tensor& dst, const Tensor& src) {
  copy_raw(dst, src);
}

Tensor contiguous_copy(const Tensor& a) {
  Tensor out = empty(a.shape(), a.dtype(), a.device());
  copy_raw(out, a);
  return out;
}

Tensor contiguous(const Tensor& a) {
  if (a.is_contiguous()) return a;
  Tensor out = contiguous_copy(a.detach());
  if (autograd::needs_grad({a}))
    autograd::record("contiguous", {a}, out, {},
                     [](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
                       return std::vector<Tensor>{g[0]};
                     });
  return out;
}

Tensor cast(const Tensor& a, DType dtype) {
  if (a.dtype() == dtype) return a;
  Tensor out = empty(a.shape(), dtype, a.device());
  copy_raw(out, a);
  if (autograd::needs_grad({a}) && is_floating(dtype))
    autograd::record("cast", {a}, out, {},
                     [from = a.dtype()](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
                       return std::vector<Tensor>{cast(g[0], from)};
                     });
  return out;
}

Tensor to_device(const Tensor& a, Device device) {
  if (a.device() == device) return a;
  Tensor out = empty(a.shape(), a.dtype(), device);
  copy_raw(out, a);
  if (autograd::needs_grad({a}))
    autograd::record("to_device", {a}, out, {},
                     [from = a.device()](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
                       return std::vector<Tensor>{to_device(g[0], from)};
                     });
  return out;
}

Tensor view(const Tensor& a, const Shape& shape_in) {
  Shape shape = infer_shape(shape_in, a.numel());
  GDN_CHECK(a.is_contiguous(), "view of a non-contiguous tensor ", a.str(), " with strides ",
            shape_str(a.strides()), " as ", shape_str(shape), "; use reshape");
  Shape in = a.shape();
  return make_view_op("view", a, shape, contiguous_strides(shape), a.offset(),
                      [in](const Tensor& g) { return reshape(g, in); });
}

Tensor reshape(const Tensor& a, const Shape& shape) {
  if (a.is_contiguous()) return view(a, shape);
  return view(contiguous(a), shape);
}

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  if (a.dim() == 0) return reshape(a, {1});
  int64_t s = wrap_dim(start_dim, a.dim()), e = wrap_dim(end_dim, a.dim());
  GDN_CHECK(s <= e, "flatten: start_dim ", start_dim, " after end_dim ", end_dim);
  Shape out;
  for (int64_t i = 0; i < s; ++i) out.push_back(a.size(i));
  int64_t m = 1;
  for (int64_t i = s; i <= e; ++i) m *= a.size(i);
  out.push_back(m);
  for (int64_t i = e + 1; i < a.dim(); ++i) out.push_back(a.size(i));
  return reshape(a, out);
}

Tensor permute(const Tensor& a, const std::vector<int64_t>& dims) {
  GDN_CHECK(int64_t(dims.size()) == a.dim(), "permute: ", dims.size(), " dims for ", a.str());
  std::vector<int64_t> p(dims.size()), inv(dims.size());
  std::vector<bool> seen(dims.size(), false);
  Shape shape(dims.size());
  Strides strides(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    p[i] = wrap_dim(dims[i], a.dim());
    GDN_CHECK(!seen[size_t(p[i])], "permute: dim ", p[i], " repeated");
    seen[size_t(p[i])] = true;
    inv[size_t(p[i])] = int64_t(i);
    shape[i] = a.size(p[i]);
    strides[i] = a.stride(p[i]);
  }
  return make_view_op("permute", a, shape, strides, a.offset(),
                      [inv](const Tensor& g) { return permute(g, inv); });
}

Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
  std::vector<int64_t> p(size_t(a.dim()));
  for (int64_t i = 0; i < a.dim(); ++i) p[size_t(i)] = i;
  std::swap(p[size_t(wrap_dim(d0, a.dim()))], p[size_t(wrap_dim(d1, a.dim()))]);
  return permute(a, p);
}

Tensor expand(const Tensor& a, const Shape& shape) {
  GDN_CHECK(shape.size() >= size_t(a.dim()), "expand ", shape_str(a.shape()), " to ",
            shape_str(shape));
  const size_t lead = shape.size() - size_t(a.dim());
  Strides st(shape.size(), 0);
  for (size_t i = 0; i < size_t(a.dim()); ++i) {
    GDN_CHECK(a.size(int64_t(i)) == shape[lead + i] || a.size(int64_t(i)) == 1, "expand ",
              shape_str(a.shape()), " to ", shape_str(shape));
    st[lead + i] = a.size(int64_t(i)) == 1 ? 0 : a.stride(int64_t(i));
  }
  if (shape == a.shape()) return a;
  Shape in = a.shape();
  return make_view_op("expand", a, shape, st, a.offset(),
                      [in](const Tensor& g) { return sum_to(g, in); });
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  const int64_t d = wrap_dim(dim, a.dim() + 1);
  Shape s = a.shape();
  s.insert(s.begin() + d, 1);
  return reshape(a, s);
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  const int64_t d = wrap_dim(dim, a.dim());
  GDN_CHECK(a.size(d) == 1, "squeeze: dim ", dim, " of ", shape_str(a.shape()), " is not 1");
  Shape s = a.shape();
  s.erase(s.begin() + d);
  return reshape(a, s);
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end) {
  const int64_t d = wrap_dim(dim, a.dim());
  const int64_t n = a.size(d);
  if (start < 0) start += n;
  if (end < 0) end += n;
  end = std::min(end, n);
  GDN_CHECK(start >= 0 && start <= end, "slice [", start, ", ", end, ") of dim ", dim, " of ",
            shape_str(a.shape()));
  Shape shape = a.shape();
  shape[size_t(d)] = end - start;
  Shape in = a.shape();
  return make_view_op("slice", a, shape, a.strides(), a.offset() + start * a.stride(d),
                      [in, d, start, end](const Tensor& g) {
                        Tensor full = zeros(in, g.dtype(), g.device());
                        Tensor part = slice(full, d, start, end);
                        copy_raw(part, g);
                        return full;
                      });
}

Tensor concat(const std::vector<Tensor>& ts, int64_t dim) {
  GDN_CHECK(!ts.empty(), "concat of no tensors");
  const Tensor& first = ts[0];
  const int64_t d = wrap_dim(dim, first.dim());
  const Device dev = detail::common_device("concat", ts);
  Shape shape = first.shape();
  int64_t total = 0;
  for (const Tensor& t : ts) {
    GDN_CHECK(t.dim() == first.dim() && t.dtype() == first.dtype(), "concat: ", t.str(), " and ",
              first.str());
    for (int64_t i = 0; i < t.dim(); ++i)
      GDN_CHECK(i == d || t.size(i) == first.size(i), "concat along dim ", dim, ": shapes ",
                shape_str(first.shape()), " and ", shape_str(t.shape()));
    total += t.size(d);
  }
  shape[size_t(d)] = total;
  Tensor out = empty(shape, first.dtype(), dev);
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (const Tensor& t : ts) {
    starts.push_back(at);
    Tensor part = Tensor::make_view(out, t.shape(), out.strides(), at * out.stride(d));
    copy_raw(part, t);
    at += t.size(d);
  }
  if (autograd::needs_grad(ts)) {
    std::vector<int64_t> sizes;
    for (const Tensor& t : ts) sizes.push_back(t.size(d));
    autograd::record("concat", ts, out, {},
                     [d, starts, sizes](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
                       std::vector<Tensor> out;
                       for (size_t i = 0; i < starts.size(); ++i)
                         out.push_back(slice(g[0], d, starts[i], starts[i] + sizes[i]));
                       return out;
                     });
  }
  return out;
}

}  // namespace gdn::ops
