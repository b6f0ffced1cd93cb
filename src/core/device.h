// Devices: cpu, cuda:N, and meta (shape and allocation accounting only, no data).
#pragma once
#include <string>

namespace gdn {

enum class DeviceType : uint8_t { cpu, cuda, meta };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(i) {}
  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device meta() { return {DeviceType::meta, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool is_meta() const { return type == DeviceType::meta; }
  std::string str() const;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// "cpu", "meta", "cuda", "cuda:1"; "auto" picks cuda:0 when a CUDA device is present, else cpu.
Device parse_device(const std::string& s);

// Whether the CUDA backend was compiled in, and how many devices the driver reports (0 if none).
bool cuda_compiled();
int cuda_device_count();

}  // namespace gdn
