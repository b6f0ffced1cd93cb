// NumPy .npy files (format versions 1.0-3.0, little-endian, C order) in and out, so users can
// compare kernels and activations with their own code.
#pragma once
#include <string>
#include <vector>

#include "src/core/tensor.h"

namespace gdn::io {

// Reads a CPU tensor. Supported dtypes: <f2 <f4 <f8 <i4 <i8 (and |u1 / <u2 / <u4 read as
// int64). Errors name the file and what is wrong (bad magic, header, dtype, truncated data).
Tensor load_npy(const std::string& path);
// Writes float16/32/64, int32/64 tensors (bfloat16 is widened to float32: numpy has no bf16).
void save_npy(const std::string& path, const Tensor& t);
// The values of an int32 or int64 CPU tensor, exactly (no pass through a double, which rounds
// int64 values beyond 2^53).
std::vector<int64_t> integer_values(const Tensor& t);

}  // namespace gdn::io
