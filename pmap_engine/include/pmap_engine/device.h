// Devices: N virtual CPU devices, as JAX's CPU backend gives with
// XLA_FLAGS=--xla_force_host_platform_device_count=N. A DeviceSet is a plain value: several can
// live in one process; nothing here is global runtime state.
#pragma once

#include <string>
#include <vector>

namespace pmap_engine {

struct Device {
  int id = 0;
  std::string platform = "cpu";
  std::string to_string() const;  // "CpuDevice(id=3)", as jax.devices() prints
};

class DeviceSet {
 public:
  // `count` CPU devices with ids 0..count-1.
  explicit DeviceSet(int count);
  // The device count from XLA_FLAGS' --xla_force_host_platform_device_count, or `fallback`.
  static DeviceSet from_environment(int fallback = 8);

  // Sorted by id, so "device 0" is the same device on every run (pitfall P13).
  const std::vector<Device>& devices() const { return devices_; }
  int size() const { return static_cast<int>(devices_.size()); }

 private:
  std::vector<Device> devices_;
};

}  // namespace pmap_engine
