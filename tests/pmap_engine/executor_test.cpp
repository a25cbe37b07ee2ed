// The executor's device workers: a kernel that throws on one device must come back to the
// caller as an EngineError naming the device and the op (a worker thread that let it escape
// would terminate the process), the same device on every run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "ir/primitive.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/pmap.h"

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;

// Throws from its kernel when its (scalar) operand is 2 or more: a kernel failure that only
// shows at run time, on the devices that hold such a value.
const ir::Primitive* kFailsFromTwo = ir::register_primitive({
    "test_fails_from_two",
    [](const std::vector<ir::AbstractValue>& in, const ir::Params&) { return in; },
    [](const std::vector<const Buffer*>& in, const ir::Params&) {
      const float value = in[0]->data<float>()[0];
      if (value >= 2) throw std::runtime_error("value " + std::to_string(static_cast<int>(value)));
      return std::vector<Buffer>{*in[0]};
    },
    nullptr,
});

Pmapped failing_on_four_devices() {
  PmapOptions options;
  options.axis_name = "data";
  options.devices = DeviceSet(4);
  return pmap([](const std::vector<Tree>& args) {
    return Tree(ir::bind1(*kFailsFromTwo, {args[0].leaf()}) * 2.0);
  }, options);
}

TEST(DeviceWorkers, AKernelThatThrowsIsReThrownNamingTheLowestFailedDeviceAndTheOp) {
  // Devices 1 (value 3) and 2 (value 2) fail; device 1 is reported, whichever worker ran first.
  const Array x = Array::from_floats({4}, {0, 3, 2, 1});
  for (int attempt = 0; attempt < 20; ++attempt) {
    try {
      failing_on_four_devices()({Tree(x)});
      FAIL() << "the step ran although two devices' kernels threw";
    } catch (const EngineError& error) {
      EXPECT_THAT(error.what(), HasSubstr("device 1: test_fails_from_two (equation 0 of the "
                                          "program) failed: value 3"));
    }
  }
}

TEST(DeviceWorkers, TheStepRunsAgainOnceItsInputsAreGood) {
  Pmapped step = failing_on_four_devices();
  EXPECT_THROW(step({Tree(Array::from_floats({4}, {0, 1, 2, 0}))}), EngineError);
  const Tree out = step({Tree(Array::from_floats({4}, {0, 1, 1, 0}))});
  EXPECT_EQ(out.leaf().to_doubles(), (std::vector<double>{0, 2, 2, 0}));
}

}  // namespace
}  // namespace pmap_engine
