// Tensor: a handle to shared storage with offset, shape, strides (elements), dtype and device,
// plus the autograd fields (requires_grad, grad, the node that produced it). Copies of a Tensor
// share everything; ops live in src/ops/ops.h.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "src/core/dtype.h"
#include "src/core/error.h"
#include "src/core/shape.h"
#include "src/core/storage.h"

namespace gdn {

namespace autograd {
struct Node;
}

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // elements
  Shape shape;
  Strides strides;
  DType dtype = DType::float32;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
  int output_nr = 0;  // which output of grad_fn this is
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // A new, uninitialised tensor (contiguous). Tagged with the thread's memory category.
  static Tensor empty(const Shape& shape, DType dtype = DType::float32,
                      Device device = Device::cpu());
  // A view sharing `base`'s storage.
  static Tensor make_view(const Tensor& base, const Shape& shape, const Strides& strides,
                          int64_t offset);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return shape_numel(impl().shape); }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  size_t element_size() const { return dtype_size(impl().dtype); }
  size_t nbytes() const { return size_t(numel()) * element_size(); }
  Device device() const { return impl().storage->device(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }

  // Pointer to the first element (null on meta).
  void* data_ptr() const;
  template <typename T>
  T* data() const {
    GDN_CHECK(dtype_of<T>::value == dtype(), "tensor of dtype ", dtype_name(dtype()),
              " accessed as ", dtype_name(dtype_of<T>::value));
    return static_cast<T*>(data_ptr());
  }

  // Autograd.
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool r);
  Tensor grad() const;
  void set_grad(const Tensor& g);
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  // Backpropagates from this tensor; `grad` defaults to 1 for a single-element tensor.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  // Same data, no graph history.
  Tensor detach() const;

  // Host-side conveniences (copy to the CPU when needed; not for meta).
  std::vector<double> to_vector() const;
  double item() const;
  std::string str() const;  // "Tensor[2, 3] float32 cpu"

  TensorImpl& impl() const {
    GDN_CHECK(impl_, "use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace gdn
