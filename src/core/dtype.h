// Element types of tensors. Floating types compute in fp32 (fp64 for float64).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/numeric.h"

namespace gdn {

enum class DType : uint8_t { float32, float64, bfloat16, float16, int32, int64 };

size_t dtype_size(DType d);
const char* dtype_name(DType d);
DType parse_dtype(const std::string& name);  // "float32", "fp32", "bf16", ...; throws on unknown
bool is_floating(DType d);

template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::float64;
};
template <>
struct dtype_of<bf16> {
  static constexpr DType value = DType::bfloat16;
};
template <>
struct dtype_of<fp16> {
  static constexpr DType value = DType::float16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::int32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::int64;
};

// One dtype dispatch for ops, optimizers and I/O: calls fn(TypeTag<T>{}) with the C++ type T of
// `dt` among the `Types`, or fails naming `what`, the dtype and the types accepted. In the body:
//   dispatch_dtype<FloatingTypes>(x.dtype(), "rms_norm", [&](auto tag) {
//     using T = typename decltype(tag)::type;  ...  });
template <typename T>
struct TypeTag {
  using type = T;
};
template <typename... Ts>
struct TypeList {};
using FloatingTypes = TypeList<float, double, bf16, fp16>;
using KernelTypes = TypeList<float, double, bf16>;  // the gated-delta-rule kernels' inputs
using IndexTypes = TypeList<int32_t, int64_t>;
using AllTypes = TypeList<float, double, bf16, fp16, int32_t, int64_t>;

namespace detail {
[[noreturn]] void fail_dispatch(const char* what, DType dt, const std::string& accepted);
template <typename Types>
struct Dispatch;
template <typename... Ts>
struct Dispatch<TypeList<Ts...>> {
  template <typename Fn>
  static bool run(DType dt, Fn& fn) {
    return ((dt == dtype_of<Ts>::value ? (fn(TypeTag<Ts>{}), true) : false) || ...);
  }
  static std::string names() {
    std::string s;
    ((s += (s.empty() ? "" : ", ") + std::string(dtype_name(dtype_of<Ts>::value))), ...);
    return s;
  }
};
}  // namespace detail

template <typename Types, typename Fn>
void dispatch_dtype(DType dt, const char* what, Fn&& fn) {
  if (!detail::Dispatch<Types>::run(dt, fn))
    detail::fail_dispatch(what, dt, detail::Dispatch<Types>::names());
}

}  // namespace gdn
