// Devices: N virtual CPU devices, as JAX's CPU backend gives with
// XLA_FLAGS=--xla_force_host_platform_device_count=N, or the visible CUDA devices. A DeviceSet is
// a plain value: several can live in one process; nothing here is global runtime state.
#pragma once

#include <string>
#include <vector>

namespace pmap_engine {

// The platforms of JAX_PLATFORMS that the engine knows.
enum class Platform { kCpu, kCuda };

// "cpu" or "cuda": the names JAX_PLATFORMS and XLA's PJRT clients use.
const char* platform_name(Platform platform);

struct Device {
  int id = 0;
  Platform platform = Platform::kCpu;
  // "CpuDevice(id=3)" or "CudaDevice(id=0)", as jax.devices() prints.
  std::string to_string() const;
};

class DeviceSet {
 public:
  // `count` CPU devices with ids 0..count-1.
  explicit DeviceSet(int count);
  // The CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies), ids 0..n-1 in the CUDA
  // runtime's order. Throws EngineError naming the cause and the CPU fallback when there are
  // none: a build without CUDA, no driver, no device.
  static DeviceSet cuda();
  // The devices JAX would use, from the environment. JAX_PLATFORMS is a comma-separated list of
  // cpu, cuda and its alias gpu; as in JAX, every listed platform must initialize (else
  // EngineError) and the first one listed provides the devices. Unset or empty: the CPU devices,
  // where JAX would prefer a GPU, because the CUDA backend executes nothing yet. The CPU device
  // count comes from XLA_FLAGS' --xla_force_host_platform_device_count, or `fallback`.
  static DeviceSet from_environment(int fallback = 8);

  // Sorted by id, so "device 0" is the same device on every run (pitfall P13).
  const std::vector<Device>& devices() const { return devices_; }
  int size() const { return static_cast<int>(devices_.size()); }
  // One platform per set, as one JAX backend's devices share one.
  Platform platform() const { return devices_.front().platform; }

 private:
  DeviceSet(Platform platform, int count);

  std::vector<Device> devices_;
};

// What the CUDA runtime reports: how many CUDA devices this process sees, or why it sees none.
struct CudaProbe {
  int device_count = 0;
  std::string error;  // Empty when device_count > 0.
};
CudaProbe probe_cuda();
bool cuda_available();

// Throws EngineError unless the engine can execute programs on `devices`: the CUDA backend has no
// kernels yet, and running CUDA-placed work on the CPU instead would hide that.
void require_executable(const std::vector<Device>& devices);
void require_executable(const DeviceSet& devices);

}  // namespace pmap_engine
