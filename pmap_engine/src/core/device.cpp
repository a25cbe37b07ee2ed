#include "pmap_engine/device.h"

#include <cstdlib>
#include <regex>

#include "pmap_engine/dtype.h"

namespace pmap_engine {

std::string Device::to_string() const { return "CpuDevice(id=" + std::to_string(id) + ")"; }

DeviceSet::DeviceSet(int count) {
  if (count < 1)
    throw EngineError("a device set needs at least one device, got " + std::to_string(count));
  for (int id = 0; id < count; ++id) devices_.push_back({id, "cpu"});
}

DeviceSet DeviceSet::from_environment(int fallback) {
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

}  // namespace pmap_engine
