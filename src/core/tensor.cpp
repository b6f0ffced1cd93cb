// Tensor construction, accessors and host-side conveniences.
#include "src/core/tensor.h"

#include <cstdio>

namespace gdn {

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) GDN_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * dtype_size(dtype), device,
                                            current_mem_category());
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(impl);
}

Tensor Tensor::make_view(const Tensor& base, const Shape& shape, const Strides& strides,
                         int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(impl);
}

int64_t Tensor::size(int64_t d) const {
  return impl().shape[wrap_dim(d, dim())];
}
int64_t Tensor::stride(int64_t d) const {
  return impl().strides[wrap_dim(d, dim())];
}

bool Tensor::is_contiguous() const {
  const auto& s = impl().shape;
  const auto& st = impl().strides;
  int64_t expected = 1;
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) {
    if (s[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  void* base = impl().storage->data();
  if (!base) return nullptr;
  return static_cast<char*>(base) + impl().offset * int64_t(element_size());
}

Tensor& Tensor::set_requires_grad(bool r) {
  GDN_CHECK(!r || is_floating(dtype()), "only floating tensors can require grad, not ",
            dtype_name(dtype()));
  GDN_CHECK(is_leaf() || r, "cannot clear requires_grad on a non-leaf tensor; use detach()");
  impl().requires_grad = r;
  return *this;
}

Tensor Tensor::grad() const {
  return impl().grad ? Tensor(impl().grad) : Tensor();
}

void Tensor::set_grad(const Tensor& g) {
  if (!g.defined()) {
    impl().grad.reset();
    return;
  }
  GDN_CHECK(g.shape() == shape(), "grad of shape ", shape_str(g.shape()), " for a tensor of shape ",
            shape_str(shape()));
  impl().grad = g.impl_ptr();
}

Tensor Tensor::detach() const {
  auto impl2 = std::make_shared<TensorImpl>(impl());
  impl2->requires_grad = false;
  impl2->grad.reset();
  impl2->grad_fn.reset();
  impl2->output_nr = 0;
  return Tensor(impl2);
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  return "Tensor" + shape_str(shape()) + " " + dtype_name(dtype()) + " " + device().str();
}

}  // namespace gdn
