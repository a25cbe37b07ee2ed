#include "pmap_engine/device.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <regex>

#include "pmap_engine/dtype.h"

namespace pmap_engine {
namespace {

// The CPU devices: XLA_FLAGS' --xla_force_host_platform_device_count, or `fallback`.
DeviceSet cpu_from_xla_flags(int fallback) {
  const char* flags = std::getenv("XLA_FLAGS");
  if (flags == nullptr) return DeviceSet(fallback);
  std::smatch match;
  const std::string text = flags;
  static const std::regex flag(R"(--xla_force_host_platform_device_count=(\S*))");
  if (!std::regex_search(text, match, flag)) return DeviceSet(fallback);
  const std::string value = match[1];
  char* end = nullptr;
  long count = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || count < 1 || count > 4096) {
    throw EngineError("XLA_FLAGS: --xla_force_host_platform_device_count=" + value +
                      " is not a device count between 1 and 4096");
  }
  return DeviceSet(static_cast<int>(count));
}

// One JAX_PLATFORMS entry; "gpu" is JAX's alias for cuda (and rocm, which the engine lacks).
Platform parse_platform(const std::string& name, const std::string& list) {
  if (name == "cpu") return Platform::kCpu;
  if (name == "cuda" || name == "gpu") return Platform::kCuda;
  throw EngineError("JAX_PLATFORMS=" + list + ": Backend '" + name +
                    "' is not in the list of known backends: ['cpu', 'cuda'] (and 'gpu', an "
                    "alias of 'cuda')");
}

// The devices of a platform that JAX_PLATFORMS lists: as in JAX, one that fails to initialize is an
// error, not skipped.
DeviceSet listed_devices(Platform platform, const std::string& list, int fallback) {
  if (platform == Platform::kCpu) return cpu_from_xla_flags(fallback);
  try {
    return DeviceSet::cuda();
  } catch (const EngineError& error) {
    throw EngineError("JAX_PLATFORMS=" + list +
                      ": Unable to initialize backend 'cuda': " + error.what());
  }
}

std::string join(const std::vector<Device>& devices) {
  std::string text;
  for (const Device& device : devices) text += (text.empty() ? "" : ", ") + device.to_string();
  return "[" + text + "]";
}

}  // namespace

const char* platform_name(Platform platform) {
  return platform == Platform::kCuda ? "cuda" : "cpu";
}

// XLA names a device after its client's platform: PjRtStreamExecutorDevice::SetClient
// (xla/pjrt/pjrt_stream_executor_client.h) sets ToString() to
// StrCat(MakeAsciiTitlecase(platform_name()), "Device(id=", id(), ")"), and jaxlib's
// PyDevice::Repr (jaxlib/py_device.cc) returns that ToString(): "cuda" gives "CudaDevice(id=0)".
std::string Device::to_string() const {
  const char* kind = platform == Platform::kCuda ? "CudaDevice" : "CpuDevice";
  return std::string(kind) + "(id=" + std::to_string(id) + ")";
}

DeviceSet::DeviceSet(int count) : DeviceSet(Platform::kCpu, count) {}

DeviceSet::DeviceSet(Platform platform, int count) {
  if (count < 1)
    throw EngineError("a device set needs at least one device, got " + std::to_string(count));
  for (int id = 0; id < count; ++id) devices_.push_back({id, platform});
}

DeviceSet DeviceSet::cuda() {
  const CudaProbe probe = probe_cuda();
  if (probe.device_count == 0) {
    throw EngineError("no CUDA device: " + probe.error +
                      ". Use the CPU devices instead: JAX_PLATFORMS=cpu (the count from "
                      "XLA_FLAGS=--xla_force_host_platform_device_count=N), or DeviceSet(N)");
  }
  return DeviceSet(Platform::kCuda, probe.device_count);
}

DeviceSet DeviceSet::from_environment(int fallback) {
  const char* platforms = std::getenv("JAX_PLATFORMS");
  if (platforms == nullptr || *platforms == '\0') return cpu_from_xla_flags(fallback);
  const std::string list = platforms;
  std::optional<DeviceSet> first;
  for (size_t begin = 0;;) {
    const size_t comma = list.find(',', begin);
    DeviceSet devices =
        listed_devices(parse_platform(list.substr(begin, comma - begin), list), list, fallback);
    if (!first) first = std::move(devices);
    if (comma == std::string::npos) return *first;
    begin = comma + 1;
  }
}

bool cuda_available() { return probe_cuda().device_count > 0; }

void require_executable(const std::vector<Device>& devices) {
  const bool all_cpu = std::all_of(devices.begin(), devices.end(),
                                   [](const Device& d) { return d.platform == Platform::kCpu; });
  if (all_cpu) return;
  throw EngineError("the CUDA backend executes nothing yet; cannot run on " + join(devices) +
                    " (its kernels come in later issues, and nothing falls back to the CPU "
                    "silently). Use the CPU devices: JAX_PLATFORMS=cpu, or "
                    "PmapOptions::devices = DeviceSet(N)");
}

void require_executable(const DeviceSet& devices) { require_executable(devices.devices()); }

}  // namespace pmap_engine
