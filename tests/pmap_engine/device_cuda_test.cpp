// CUDA devices: their repr, the listing where CUDA devices exist and the clear error where none
// do, JAX_PLATFORMS, and the refusal to execute on CUDA devices. Whether devices exist is asked of
// the CUDA runtime directly, not of the engine's own probe, so the tests hold on any machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "pmap_engine/device.h"
#include "pmap_engine/dtype.h"
#include "pmap_engine/pmap.h"

#ifdef PARITY_TEST_CUDART
#include <cuda_runtime_api.h>
#endif

namespace pmap_engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// The CUDA devices this process sees, by cudaGetDeviceCount; none in a build without CUDA.
int runtime_device_count() {
#ifdef PARITY_TEST_CUDART
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
#else
  return 0;
#endif
}

// Sets (or, with nullopt, unsets) an environment variable for one scope, then restores it: CI
// may export JAX_PLATFORMS or XLA_FLAGS itself.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CudaDevices, PrintAsJaxDoes) {
  EXPECT_EQ((Device{0, Platform::kCuda}.to_string()), "CudaDevice(id=0)");
  EXPECT_EQ((Device{3, Platform::kCpu}.to_string()), "CpuDevice(id=3)");
  EXPECT_STREQ(platform_name(Platform::kCuda), "cuda");
  EXPECT_STREQ(platform_name(Platform::kCpu), "cpu");
}

// Runs on every machine: whatever the CUDA runtime reports, DeviceSet::cuda() agrees with it.
TEST(CudaDevices, ListsTheVisibleDevicesOrSaysWhyThereAreNone) {
  const int count = runtime_device_count();
  if (count > 0) {
    const DeviceSet devices = DeviceSet::cuda();
    ASSERT_EQ(devices.size(), count);
    EXPECT_EQ(devices.platform(), Platform::kCuda);
    EXPECT_EQ(devices.devices().back().id, count - 1);
    EXPECT_TRUE(cuda_available());
    return;
  }
  EXPECT_FALSE(cuda_available());
  const CudaProbe probe = probe_cuda();
  EXPECT_EQ(probe.device_count, 0);
#ifdef PARITY_TEST_CUDART
  EXPECT_THAT(probe.error, HasSubstr("cudaGetDeviceCount"));
#else
  EXPECT_THAT(probe.error, HasSubstr("this build of parity has no CUDA support"));
#endif
  EXPECT_THAT([] { DeviceSet::cuda(); },
              ThrowsMessage<EngineError>(AllOf(HasSubstr("no CUDA device: " + probe.error),
                                               HasSubstr("JAX_PLATFORMS=cpu"))));
}

TEST(CudaDevices, OnAMachineWithThemListsThemInOrderAndRefusesToExecute) {
  if (runtime_device_count() == 0) {
    GTEST_SKIP() << "no CUDA device: " << probe_cuda().error;
  }
  const DeviceSet devices = DeviceSet::cuda();
  for (int id = 0; id < devices.size(); ++id) {
    EXPECT_EQ(devices.devices()[id].id, id);
    EXPECT_EQ(devices.devices()[id].to_string(), "CudaDevice(id=" + std::to_string(id) + ")");
  }
  EXPECT_THAT([&] { require_executable(devices); },
              ThrowsMessage<EngineError>(AllOf(HasSubstr("the CUDA backend executes nothing yet"),
                                               HasSubstr("CudaDevice(id=0)"),
                                               HasSubstr("JAX_PLATFORMS=cpu"))));

  // A pmap placed on them refuses at call time rather than computing on the CPU behind the
  // user's back.
  PmapOptions options;
  options.devices = devices;
  const Pmapped identity = pmap([](const std::vector<Tree>& a) { return a[0]; }, options);
  const Array batch = Array::from_floats({devices.size()}, std::vector<float>(devices.size(), 1));
  EXPECT_THAT([&] { identity({Tree(batch)}); },
              ThrowsMessage<EngineError>(HasSubstr("the CUDA backend executes nothing yet")));
}

TEST(DeviceSetFromJaxPlatforms, CpuOrUnsetGivesTheCpuDevicesFromXlaFlags) {
  ScopedEnv flags("XLA_FLAGS", "--xla_force_host_platform_device_count=3");
  const std::optional<std::string> cpu_lists[] = {std::nullopt, "", "cpu"};
  for (const std::optional<std::string>& platforms : cpu_lists) {
    ScopedEnv env("JAX_PLATFORMS", platforms);
    const DeviceSet devices = DeviceSet::from_environment();
    EXPECT_EQ(devices.platform(), Platform::kCpu);
    EXPECT_EQ(devices.size(), 3);
    EXPECT_NO_THROW(require_executable(devices));
  }
}

TEST(DeviceSetFromJaxPlatforms, UnknownPlatformsAreRejectedByName) {
  for (const char* platforms : {"tpu", "cpu,rocm", "cpu,", " cpu"}) {
    ScopedEnv env("JAX_PLATFORMS", platforms);
    EXPECT_THAT([] { DeviceSet::from_environment(); },
                ThrowsMessage<EngineError>(
                    HasSubstr("is not in the list of known backends: ['cpu', 'cuda']")))
        << platforms;
  }
}

// As in JAX, every platform listed must initialize, even one listed after the one that provides
// the devices.
TEST(DeviceSetFromJaxPlatforms, ListedCudaMustInitialize) {
  const bool have_cuda = runtime_device_count() > 0;
  const std::pair<const char*, Platform> lists[] = {
      {"cuda", Platform::kCuda}, {"gpu", Platform::kCuda}, {"cpu,cuda", Platform::kCpu}};
  for (const auto& [platforms, first] : lists) {
    ScopedEnv env("JAX_PLATFORMS", platforms);
    if (have_cuda) {
      EXPECT_EQ(DeviceSet::from_environment().platform(), first) << platforms;
      continue;
    }
    EXPECT_THAT([] { DeviceSet::from_environment(); },
                ThrowsMessage<EngineError>(
                    AllOf(HasSubstr(std::string("JAX_PLATFORMS=") + platforms +
                                    ": Unable to initialize backend 'cuda': no CUDA device: "),
                          HasSubstr("JAX_PLATFORMS=cpu"))));
  }
}

}  // namespace
}  // namespace pmap_engine
