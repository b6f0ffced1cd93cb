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

}  // namespace gdn

// Runs the body with `scalar_t` bound to the C++ type of a floating dtype.
#define GDN_DISPATCH_FLOATING(DT, WHAT, ...)                                      \
  switch (DT) {                                                                   \
    case ::gdn::DType::float32: {                                                 \
      using scalar_t = float;                                                     \
      __VA_ARGS__;                                                                \
      break;                                                                      \
    }                                                                             \
    case ::gdn::DType::float64: {                                                 \
      using scalar_t = double;                                                    \
      __VA_ARGS__;                                                                \
      break;                                                                      \
    }                                                                             \
    case ::gdn::DType::bfloat16: {                                                \
      using scalar_t = ::gdn::bf16;                                               \
      __VA_ARGS__;                                                                \
      break;                                                                      \
    }                                                                             \
    case ::gdn::DType::float16: {                                                 \
      using scalar_t = ::gdn::fp16;                                               \
      __VA_ARGS__;                                                                \
      break;                                                                      \
    }                                                                             \
    default:                                                                      \
      GDN_FAIL(WHAT, ": expected a floating dtype, got ", ::gdn::dtype_name(DT)); \
  }

#define GDN_DISPATCH_ALL(DT, WHAT, ...)  \
  switch (DT) {                          \
    case ::gdn::DType::float32: {        \
      using scalar_t = float;            \
      __VA_ARGS__;                       \
      break;                             \
    }                                    \
    case ::gdn::DType::float64: {        \
      using scalar_t = double;           \
      __VA_ARGS__;                       \
      break;                             \
    }                                    \
    case ::gdn::DType::bfloat16: {       \
      using scalar_t = ::gdn::bf16;      \
      __VA_ARGS__;                       \
      break;                             \
    }                                    \
    case ::gdn::DType::float16: {        \
      using scalar_t = ::gdn::fp16;      \
      __VA_ARGS__;                       \
      break;                             \
    }                                    \
    case ::gdn::DType::int32: {          \
      using scalar_t = int32_t;          \
      __VA_ARGS__;                       \
      break;                             \
    }                                    \
    case ::gdn::DType::int64: {          \
      using scalar_t = int64_t;          \
      __VA_ARGS__;                       \
      break;                             \
    }                                    \
    default:                             \
      GDN_FAIL(WHAT, ": unknown dtype"); \
  }
