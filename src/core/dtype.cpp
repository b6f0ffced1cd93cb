// DType names and sizes.
#include "src/core/dtype.h"

#include "src/core/error.h"

namespace gdn {

size_t dtype_size(DType d) {
  switch (d) {
    case DType::float32:
      return 4;
    case DType::float64:
      return 8;
    case DType::bfloat16:
      return 2;
    case DType::float16:
      return 2;
    case DType::int32:
      return 4;
    case DType::int64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::float32:
      return "float32";
    case DType::float64:
      return "float64";
    case DType::bfloat16:
      return "bfloat16";
    case DType::float16:
      return "float16";
    case DType::int32:
      return "int32";
    case DType::int64:
      return "int64";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  if (s == "float32" || s == "fp32" || s == "f32" || s == "float") return DType::float32;
  if (s == "float64" || s == "fp64" || s == "f64" || s == "double") return DType::float64;
  if (s == "bfloat16" || s == "bf16") return DType::bfloat16;
  if (s == "float16" || s == "fp16" || s == "f16" || s == "half") return DType::float16;
  if (s == "int32" || s == "i32") return DType::int32;
  if (s == "int64" || s == "i64") return DType::int64;
  GDN_FAIL("unknown dtype '", s, "' (expected float32, float64, bfloat16, float16, int32, int64)");
}

bool is_floating(DType d) {
  return d == DType::float32 || d == DType::float64 || d == DType::bfloat16 || d == DType::float16;
}

}  // namespace gdn

namespace gdn::detail {

void fail_dispatch(const char* what, DType dt, const std::string& accepted) {
  GDN_FAIL(what, ": expected one of ", accepted, ", got ", dtype_name(dt));
}

}  // namespace gdn::detail
