// Kernel layouts from tensor shapes and strides.
#include "src/ops/layout.h"

#include "src/ops/dispatch.h"

namespace gdn::ops::detail {

namespace {

// Strides of `t` broadcast to `out` (0 along broadcast dims).
Strides broadcast_strides(const Shape& out, const Tensor& t) {
  const size_t n = out.size(), m = size_t(t.dim());
  Strides s(n, 0);
  for (size_t i = 0; i < m; ++i) {
    size_t o = n - m + i;
    s[o] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  }
  return s;
}

// Drops size-1 dims and merges dim i into i+1 when every operand is contiguous across them.
void collapse(Shape& shape, std::vector<Strides*> strides) {
  Shape ns;
  std::vector<Strides> nst(strides.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = !ns.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k)
      merge = nst[k].back() == (*strides[k])[i] * shape[i];
    if (merge) {
      ns.back() *= shape[i];
      for (size_t k = 0; k < strides.size(); ++k) nst[k].back() = (*strides[k])[i];
    } else {
      ns.push_back(shape[i]);
      for (size_t k = 0; k < strides.size(); ++k) nst[k].push_back((*strides[k])[i]);
    }
  }
  shape = ns;
  for (size_t k = 0; k < strides.size(); ++k) *strides[k] = nst[k];
}

}  // namespace

kern::CopyLayout copy_layout(const Tensor& dst, const Tensor& src) {
  Shape shape = dst.shape();
  Strides ss = src.strides(), sd = dst.strides();
  collapse(shape, {&ss, &sd});
  GDN_CHECK(int(shape.size()) <= kern::kMaxDims, "copy of ", src.str(), " needs more than ",
            kern::kMaxDims, " dims");
  kern::CopyLayout L;
  L.ndim = int(shape.size());
  for (int i = 0; i < L.ndim; ++i) {
    L.shape[i] = shape[i];
    L.stride_src[i] = ss[i];
    L.stride_dst[i] = sd[i];
  }
  return L;
}

kern::BroadcastLayout broadcast_layout(const Shape& out_shape, const Tensor& a, const Tensor& b) {
  Shape shape = out_shape;
  Strides sa = broadcast_strides(out_shape, a), sb = broadcast_strides(out_shape, b);
  Strides so = contiguous_strides(out_shape);
  collapse(shape, {&sa, &sb, &so});
  GDN_CHECK(int(shape.size()) <= kern::kMaxDims, "broadcast to ", shape_str(out_shape),
            " needs more than ", kern::kMaxDims, " dims");
  kern::BroadcastLayout L;
  L.ndim = int(shape.size());
  for (int i = 0; i < L.ndim; ++i) {
    L.shape[i] = shape[i];
    L.stride_a[i] = sa[i];
    L.stride_b[i] = sb[i];
  }
  return L;
}

Device common_device(const char* op, const std::vector<Tensor>& ts) {
  Device d;
  bool have = false;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (!have) {
      d = t.device();
      have = true;
    } else {
      GDN_CHECK(t.device() == d, op, ": tensors on different devices (", d.str(), " and ",
                t.device().str(), ")");
    }
  }
  GDN_CHECK(have, op, ": no defined input tensors");
  return d;
}

void check_floating(const char* op, const Tensor& t) {
  GDN_CHECK(is_floating(t.dtype()), op, ": expected a floating tensor, got ", t.str());
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  GDN_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", a.str(), " and ", b.str());
}

}  // namespace gdn::ops::detail
