// Shapes and strides (in elements), with the helpers every op needs.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace gdn {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
Strides contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);        // "[2, 3, 4]"
int64_t wrap_dim(int64_t dim, int64_t ndim);  // negative dims count from the end; checked
// The broadcast of two shapes (numpy rules); throws naming both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace gdn
