// safetensors files (Hugging Face): u64 little-endian header length N, an N-byte JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}
// padded with spaces to 8 bytes, then the raw little-endian data.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/core/tensor.h"

namespace gdn::io {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Writes atomically (temporary name, then rename). Tensors are written in their dtype
// (F32, F64, BF16, F16, I32, I64), or cast to `as` when it is given.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {},
                      std::optional<DType> as = std::nullopt);

// Reads every tensor to the CPU, validating the header (size, JSON, the type of every field,
// dtypes, shapes matching the byte counts, offsets in order, in bounds, and tiling the data
// exactly: no overlap, no gap, nothing after the last). Errors name the file, the tensor and the
// offset; a directory or missing file is refused naming the path.
NamedTensors load_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata = nullptr);

}  // namespace gdn::io
