// Per-device CUDA state, created on first use: one non-blocking stream per device (the cuBLAS and
// cuDNN handles are per stream: kernels/cuda/device_util.cuh). All ops on a device run on its
// stream, in order.
#include "src/core/cuda/cuda_context.h"

#include <array>
#include <mutex>

#include "src/core/cuda/cuda_check.h"

namespace gdn::cuda {

namespace {
constexpr int kMaxDevices = 16;
struct DeviceState {
  cudaStream_t stream = nullptr;
};
std::array<DeviceState, kMaxDevices> g_state;
std::mutex g_mu;

DeviceState& state(int index) {
  GDN_CHECK(index >= 0 && index < kMaxDevices, "CUDA device index ", index, " out of range");
  return g_state[size_t(index)];
}
}  // namespace

int device_count() {
  static int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky error: no driver means no devices
      return 0;
    }
    return n;
  }();
  return count;
}

void set_device(int index) {
  GDN_CUDA_CHECK(cudaSetDevice(index));
}

void* current_stream(int index) {
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceState& s = state(index);
  if (!s.stream) {
    set_device(index);
    GDN_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  }
  return s.stream;
}

void synchronize(int index) {
  set_device(index);
  GDN_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(current_stream(index))));
}

void memcpy_h2d(void* dst, const void* src, size_t bytes, int index) {
  auto stream = static_cast<cudaStream_t>(current_stream(index));
  set_device(index);
  GDN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
  // The host buffer may be pageable and freed right after: wait for the copy.
  GDN_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void memcpy_d2h(void* dst, const void* src, size_t bytes, int index) {
  auto stream = static_cast<cudaStream_t>(current_stream(index));
  set_device(index);
  GDN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  GDN_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void memcpy_d2d(void* dst, int dst_index, const void* src, int src_index, size_t bytes) {
  if (src_index == dst_index) {  // ordered with the device's other work by its stream
    auto stream = static_cast<cudaStream_t>(current_stream(dst_index));
    set_device(dst_index);
    GDN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  // Across devices: src is complete once its stream drains, and may be freed (and reused by its
  // stream) as soon as this returns, so the copy finishes first.
  synchronize(src_index);
  auto stream = static_cast<cudaStream_t>(current_stream(dst_index));
  set_device(dst_index);
  GDN_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_index, src, src_index, bytes, stream));
  GDN_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::string device_name(int index) {
  cudaDeviceProp prop{};
  GDN_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

}  // namespace gdn::cuda
