// CUDA runtime services used by the core (compiled only with GDN_WITH_CUDA). A plain C++
// header: streams are passed around as void* so that host code needs no CUDA headers.
#pragma once
#include <cstddef>
#include <string>

namespace gdn::cuda {

int device_count();  // 0 when no driver or no device
void set_device(int index);
void* current_stream(int index);  // the stream ops on device `index` run on
void synchronize(int index);
void memcpy_h2d(void* dst, const void* src, size_t bytes, int index);
void memcpy_d2h(void* dst, const void* src, size_t bytes, int index);
void memcpy_d2d(void* dst, int dst_index, const void* src, int src_index, size_t bytes);
std::string device_name(int index);  // e.g. "NVIDIA H200"

}  // namespace gdn::cuda
