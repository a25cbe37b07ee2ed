// interop/python/parity_jax_log.py, tested with NumPy arrays standing in for jax.Arrays: JAX is
// not installable here, so no real JAX program runs in this test. The helper only flattens
// nested dicts and calls numpy.asarray on the leaves, which is what it would do with jax.Arrays
// too; what is checked is that parity's own C++ readers (read_safetensors, read_run_dir) accept
// what it writes and read back the values, names, layouts and digests put in.
//
// Expected values: the Python script below builds its arrays from formulas the test recomputes
// (kernel element i of step s = 0.25 i + s, exact in float32), and the digests are parity's C++
// digest_sample_ids / digest_sample_set / count_duplicates on the same ids.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "command.h"
#include "parity/common/case_spec.h"
#include "parity/common/digest.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "python_helper_support.h"
#include "test_files.h"

namespace parity {
namespace {

// A pmap-style loop of 3 steps on 2 devices: params and grads carry a leading device axis
// (replicated=True keeps device 0's copy; device 1's is made different on purpose so that taking
// the wrong one shows), per-device losses, the step's global sample ids.
constexpr const char* kScript = R"PY(
import sys
import numpy as np
from parity_jax_log import JaxRunLogger

log_dir, other_dir = sys.argv[1], sys.argv[2]
shapes = {"Dense_0": {"kernel": (4, 3), "bias": (3,)}, "Dense_1": {"kernel": (3, 2), "bias": (2,)}}

def per_device(value):
    return np.stack([value, value + np.float32(1000)])

def tree(fill):
    layers = {name: {leaf: per_device(fill(shape)) for leaf, shape in leaves.items()}
              for name, leaves in shapes.items()}
    return {"params": layers, "batch_stats": {}}  # an empty collection, as flatten_dict drops it

logger = JaxRunLogger(log_dir, record_steps=[0, -1], steps=3)
idle = JaxRunLogger(other_dir, record_steps=[0], steps=3, process_index=1)
for step in range(3):
    params = tree(lambda shape: (np.arange(np.prod(shape), dtype=np.float32) * np.float32(0.25)
                                 + np.float32(step)).reshape(shape))
    grads = tree(lambda shape: (np.arange(np.prod(shape), dtype=np.float32) + np.float32(1))
                 .reshape(shape) * np.float32(0.125 * (step + 1)))
    losses = np.array([float("nan") if step == 1 else 1.5 + step, 2.5 + step], dtype=np.float32)
    ids = [5, -3, 2**40 + step, 5]
    for each in (logger, idle):
        each.log_step(step, params=params, grads=grads, replica_losses=losses, lr=1e-3,
                      step_seconds=0.01, sample_ids=ids, replicated=True)
logger.close()
idle.close()
)PY";

constexpr int64_t kSteps = 3;

std::vector<int64_t> sample_ids(int64_t step) { return {5, -3, (int64_t{1} << 40) + step, 5}; }

struct Leaf {
  std::string name;
  Shape shape;
};

const std::vector<Leaf>& leaves() {
  static const std::vector<Leaf> all = {{"params/Dense_0/bias", {3}},
                                        {"params/Dense_0/kernel", {4, 3}},
                                        {"params/Dense_1/bias", {2}},
                                        {"params/Dense_1/kernel", {3, 2}}};
  return all;
}

float param_value(int64_t step, size_t i) { return 0.25f * static_cast<float>(i) + step; }
float grad_value(int64_t step, size_t i) {
  return (static_cast<float>(i) + 1.0f) * static_cast<float>(0.125 * (step + 1));
}

// The global L2 norm of all leaves, the way ddp_ref computes it (float64 sum of squares).
double norm(int64_t step, float (*value)(int64_t, size_t)) {
  double sum = 0;
  for (const Leaf& leaf : leaves()) {
    for (size_t i = 0; i < shape_num_elements(leaf.shape); ++i) {
      const double v = value(step, i);
      sum += v * v;
    }
  }
  return std::sqrt(sum);
}

class JaxHelperWithNumpyArrays : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::python_has_module("numpy"))
        << testing::python_executable()
        << " cannot import numpy; install python3-numpy (scripts/install-deps.sh) or "
           "point PARITY_PYTHON at an interpreter that has it";
    testing::write_bytes(dir_.path("loop.py"), kScript);
    const testing::CommandResult result = testing::run_command(
        fmt::format("PYTHONPATH={} {} {} {} {}",
                    testing::shell_quote(testing::python_helpers_dir().string()),
                    testing::shell_quote(testing::python_executable()),
                    dir_.path("loop.py").string(), log_dir().string(), dir_.path("other").string()),
        120);
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }

  std::filesystem::path log_dir() const { return dir_.path("log"); }

  testing::TempDir dir_;
};

TEST_F(JaxHelperWithNumpyArrays, MetricsLinesAreRunDirectoryStepMetricsWithCppDigests) {
  // The script logs two devices: the run directory says so (the reader checks replica_losses
  // against the replicas).
  const RunDir run = testing::read_log_as_run_dir(
      log_dir(), load_case("mlp2-fmnist", {"parallel.replicas=2"}), dir_.path("run"),
      "parity_jax_log");
  ASSERT_EQ(run.steps.size(), static_cast<size_t>(kSteps));
  for (int64_t step = 0; step < kSteps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const StepMetrics& metrics = run.steps[static_cast<size_t>(step)];
    EXPECT_EQ(metrics.step, step);
    ASSERT_EQ(metrics.replica_losses.size(), 2u);
    if (step == 1) {
      // A NaN device loss stays NaN through the "NaN" string JSON needs for it.
      EXPECT_TRUE(std::isnan(metrics.loss));
      EXPECT_TRUE(std::isnan(metrics.replica_losses[0]));
    } else {
      EXPECT_EQ(metrics.loss, 2.0 + static_cast<double>(step));  // mean of 1.5 + s and 2.5 + s
      EXPECT_EQ(metrics.replica_losses[0], 1.5 + static_cast<double>(step));
    }
    EXPECT_EQ(metrics.replica_losses[1], 2.5 + static_cast<double>(step));
    EXPECT_NEAR(metrics.grad_norm, norm(step, grad_value), 1e-12 * norm(step, grad_value));
    EXPECT_NEAR(metrics.param_norm, norm(step, param_value), 1e-12 * norm(step, param_value));
    EXPECT_EQ(metrics.lr, 1e-3);
    EXPECT_EQ(metrics.step_seconds, 0.01);
    // Negative and > 32-bit ids exercise the little-endian int64 bytes of both implementations.
    EXPECT_EQ(metrics.samples_digest, digest_sample_ids(sample_ids(step)));
    EXPECT_EQ(metrics.samples_set_digest, digest_sample_set(sample_ids(step)));
    EXPECT_EQ(metrics.duplicate_samples, std::optional<int64_t>(1));
  }
}

TEST_F(JaxHelperWithNumpyArrays, TensorFilesKeepFlaxNamesAndLayoutsAtTheRecordSteps) {
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(log_dir() / "tensors")) {
    files.insert(entry.path().filename().string());
  }
  // record_steps [0, -1] of 3 steps.
  EXPECT_EQ(files, (std::set<std::string>{"step_000000.safetensors", "step_000002.safetensors"}));
  for (const int64_t step : {int64_t{0}, int64_t{2}}) {
    SCOPED_TRACE("step " + std::to_string(step));
    const SafetensorsFile file =
        read_safetensors(log_dir() / "tensors" / fmt::format("step_{:06d}.safetensors", step));
    EXPECT_EQ(file.metadata.at("naming"), "flax");
    EXPECT_EQ(file.metadata.at("producer"), "parity_jax_log");
    EXPECT_EQ(file.metadata.at("step"), std::to_string(step));
    ASSERT_EQ(file.tensors.size(), 2 * leaves().size());  // the empty batch_stats left no name
    for (const Leaf& leaf : leaves()) {
      for (const std::string kind : {"params", "grads"}) {
        const std::string name = kind + "/" + leaf.name;
        ASSERT_TRUE(file.tensors.count(name)) << name;
        const HostTensor& tensor = file.tensors.at(name);
        EXPECT_EQ(tensor.dtype, DType::F32) << name;
        EXPECT_EQ(tensor.shape, leaf.shape) << name;  // Flax's (in, out), device axis removed
        for (size_t i = 0; i < tensor.num_elements(); ++i) {
          const float expected = kind == "params" ? param_value(step, i) : grad_value(step, i);
          ASSERT_EQ(tensor.data_as<float>()[i], expected) << name << "[" << i << "]";
        }
      }
    }
  }
}

// The files of a Flax MLP shaped like mlp2-fmnist's (Dense_0 784 -> 256, Dense_1 256 -> 10) go
// through `parity import tensors` onto the canonical names with no name left over, and keep
// their values: Flax's Dense kernel is already the canonical (in, out) layout.
constexpr const char* kMlp2Script = R"PY(
import sys
import numpy as np
from parity_jax_log import JaxRunLogger

def layer(fan_in, fan_out, offset):
    kernel = np.arange(fan_in * fan_out, dtype=np.float32).reshape(fan_in, fan_out) + offset
    return {"kernel": kernel, "bias": np.full(fan_out, offset, dtype=np.float32)}

variables = {"params": {"Dense_0": layer(784, 256, 0.5), "Dense_1": layer(256, 10, 2.5)}}
logger = JaxRunLogger(sys.argv[1], record_steps=[0], steps=1)
logger.log_step(0, params=variables, grads=variables, loss=2.25, lr=1e-3)
logger.close()
)PY";

TEST_F(JaxHelperWithNumpyArrays, FlaxNamedFilesImportOntoTheCanonicalNames) {
  testing::write_bytes(dir_.path("mlp2.py"), kMlp2Script);
  const std::filesystem::path log = dir_.path("mlp2-log");
  const std::filesystem::path run = dir_.path("mlp2-run");
  const std::string parity = PARITY_EXECUTABLE;
  for (const std::string& command :
       {fmt::format("PYTHONPATH={} {} {} {}",
                    testing::shell_quote(testing::python_helpers_dir().string()),
                    testing::shell_quote(testing::python_executable()),
                    dir_.path("mlp2.py").string(), log.string()),
        fmt::format(
            "{} import metrics {}/metrics.jsonl --case mlp2-fmnist --map loss=loss --out {}",
            parity, log.string(), run.string()),
        fmt::format("{} import tensors {}/tensors --case mlp2-fmnist --out {}", parity,
                    log.string(), run.string())}) {
    const testing::CommandResult result = testing::run_command(command, 120);
    ASSERT_EQ(result.exit_code, 0) << command << "\n" << result.output;
  }
  const NamedTensors imported = read_step_tensors(run, 0);
  std::set<std::string> names;
  for (const auto& entry : imported) names.insert(entry.first);
  const std::set<std::string> expected = {
      "grads/dense0.bias",  "grads/dense0.kernel",  "grads/dense1.bias",  "grads/dense1.kernel",
      "params/dense0.bias", "params/dense0.kernel", "params/dense1.bias", "params/dense1.kernel"};
  for (const std::string& name : expected) EXPECT_TRUE(names.count(name)) << name;
  const HostTensor& kernel = imported.at("params/dense0.kernel");
  ASSERT_EQ(kernel.shape, (Shape{784, 256}));
  for (const size_t i : {size_t{0}, size_t{1}, size_t{256}, size_t{784 * 256 - 1}}) {
    EXPECT_EQ(kernel.data_as<float>()[i], static_cast<float>(i) + 0.5f) << i;
  }
  EXPECT_EQ(imported.at("grads/dense1.bias").data_as<float>()[9], 2.5f);
}

TEST_F(JaxHelperWithNumpyArrays, OnlyProcessZeroWrites) {
  EXPECT_FALSE(std::filesystem::exists(dir_.path("other")));
  EXPECT_TRUE(std::filesystem::exists(log_dir() / "metrics.jsonl"));
}

}  // namespace
}  // namespace parity
