// Element types of tensors. Floating types compute in fp32 (fp64 for float64).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/numeric.h"

namespace gdn {

enum class DType : uint8_t { float32, float64, bfloat16, float16, int32, int64 };

size_t dtype_size(DType d);
const char* dtype_name(DType d);
DType parse_dtype(const std::string& name);  // "float32", "fp32", "bf16", ...; throws on unknown
bool is_floating(DType d);

// The DType of a C++ element type: dtype_of<float>::value == DType::float32.
template <typename T>
struct dtype_of {
  static constexpr DType value = [] {
    if constexpr (std::is_same_v<T, float>) return DType::float32;
    if constexpr (std::is_same_v<T, double>) return DType::float64;
    if constexpr (std::is_same_v<T, bf16>) return DType::bfloat16;
    if constexpr (std::is_same_v<T, fp16>) return DType::float16;
    if constexpr (std::is_same_v<T, int32_t>) return DType::int32;
    if constexpr (std::is_same_v<T, int64_t>) return DType::int64;
  }();
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
