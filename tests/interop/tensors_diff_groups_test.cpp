// `parity tensors diff` pairs tensors within their group only (params, grads): a real ddp_ref
// run's step file against files numpy writes from that step's own tensors in torch's names
// and layouts, as interop/python's torch helper names them (grads/0.weight, (out, in)).
// Identical data in the same group is "same"; a gradient is never compared with a parameter.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "command.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "test_files.h"

namespace parity::interop {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// Debian's interpreter, with numpy, and interop/python's safetensors reader and writer.
constexpr const char* kPython = "/usr/bin/python3";
const fs::path kHelpersDir = fs::path(PARITY_SOURCE_DIR) / "interop" / "python";

std::string parity(const std::string& arguments) {
  return std::string(PARITY_EXECUTABLE) + " " + arguments;
}

// A real ddp_ref run of one step recording its tensors at step 0 (params/, grads/ and
// replicas/param_digests), made once for the suite in a directory of its own (a TempDir made
// inside a test would share that test's directory and go with it).
class TensorsDiffGroups : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    run_parent_ = testing::fresh_directory(std::to_string(::getpid()) + "-TensorsDiffGroups-run");
    const auto result = testing::run_command(
        parity(fmt::format("ddp mlp2-fmnist --set train.steps=1 --set data.per_replica_batch=16 "
                           "--set 'train.record_steps=[0]' --quiet --out {}",
                           ddp_run().string())));
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    fs::remove_all(run_parent_, ignored);
  }
  static fs::path ddp_run() { return run_parent_ / "ddp"; }
  static fs::path step_file() { return step_tensors_path(ddp_run(), 0); }

 private:
  static inline fs::path run_parent_;
};

// Writes, from the run's step file (read by interop/python's reader), torch-named files (nn.Sequential(Linear, Tanh, Linear):
// dense<i> is module 2*i, kernels transposed to (out, in)):
//   grads_only.safetensors  grads/<torch name>: the run's gradients
//   both.safetensors        params/ and grads/<torch name>: the run's parameters and gradients
//   grads_plain.npz         <torch name>: the run's gradients, no group prefix
void write_torch_files(const fs::path& dir, const fs::path& step_file) {
  const std::string script = R"(
import sys
import numpy as np
from parity_log_common import read_safetensors, write_safetensors
run = read_safetensors(sys.argv[1])
def torch_names(group):
    out = {}
    for i in (0, 1):
        out[f'{2 * i}.weight'] = run[f'{group}/dense{i}.kernel'].T.copy()
        out[f'{2 * i}.bias'] = run[f'{group}/dense{i}.bias']
    return out
out = sys.argv[2]
grads = {f'grads/{k}': v for k, v in torch_names('grads').items()}
write_safetensors(out + '/grads_only.safetensors', grads)
params = {f'params/{k}': v for k, v in torch_names('params').items()}
write_safetensors(out + '/both.safetensors', {**params, **grads})
np.savez(out + '/grads_plain.npz', **torch_names('grads'))
)";
  std::ofstream(dir / "write.py") << script;
  const auto result = testing::run_command(
      fmt::format("PYTHONPATH={} {} {} {} {}", kHelpersDir.string(), kPython,
                  (dir / "write.py").string(), step_file.string(), dir.string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
}

// The issue's case: a torch file of gradients against a run's step file used to pair
// grads/0.weight with params/dense0.kernel and call identical data DIFFERENT.
TEST_F(TensorsDiffGroups, ATorchGradsFileMatchesTheRunsGradsAndLeavesItsParamsUncompared) {
  testing::TempDir dir;
  write_torch_files(dir.path(), step_file());
  const auto result = testing::run_command(parity(fmt::format(
      "tensors diff {} {}", dir.path("grads_only.safetensors").string(), step_file().string())));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("grads_only.safetensors holds grads (by their names' "
                                       "prefixes)"));
  EXPECT_THAT(result.output, HasSubstr("step_000000.safetensors holds grads, params"));
  EXPECT_THAT(result.output, HasSubstr("set aside replicas/param_digests"));
  EXPECT_THAT(result.output, HasSubstr("dense0.kernel <- grads/0.weight (transposed"));
  EXPECT_THAT(result.output, HasSubstr("grads/dense1.kernel"));
  EXPECT_THAT(result.output, Not(HasSubstr("params/dense0.kernel ")));
  EXPECT_THAT(result.output,
              HasSubstr("parity tensors diff of grads: 4 names matched, 0 unmatched, 0 of 4 "
                        "compared tensors outside rtol 0 atol 0: same; not compared: params "
                        "(only B holds params)"));
}

TEST_F(TensorsDiffGroups, BothGroupsPairGroupByGroup) {
  testing::TempDir dir;
  write_torch_files(dir.path(), step_file());
  const auto result = testing::run_command(parity(fmt::format(
      "tensors diff {} {}", dir.path("both.safetensors").string(), step_file().string())));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("parity tensors diff of grads and params: 8 names matched, 0 unmatched, "
                        "0 of 8 compared tensors outside rtol 0 atol 0: same\n"));
}

// Gradients against parameters only: nothing comparable, which is bad input (exit 2), never a
// verdict.
TEST_F(TensorsDiffGroups, GradientsAgainstParametersAloneAreRefused) {
  testing::TempDir dir;
  write_torch_files(dir.path(), step_file());
  const auto result = testing::run_command(
      parity(fmt::format("tensors diff {} {}", dir.path("grads_only.safetensors").string(),
                         (ddp_run() / "init.safetensors").string())));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("nothing to compare: A ("));
  EXPECT_THAT(result.output, HasSubstr("grads_only.safetensors) holds grads and B ("));
  EXPECT_THAT(result.output, HasSubstr("init.safetensors) holds params; tensors of different "
                                       "groups are never compared"));
  EXPECT_THAT(result.output, HasSubstr("--kind-a grads or --kind-b grads"));
}

// A file with no group prefixes is a saved model (params) unless --kind-a says otherwise.
TEST_F(TensorsDiffGroups, AFileWithoutPrefixesIsParamsUnlessKindSaysGrads) {
  testing::TempDir dir;
  write_torch_files(dir.path(), step_file());
  const std::string plain = dir.path("grads_plain.npz").string();
  auto result =
      testing::run_command(parity(fmt::format("tensors diff {} {}", plain, step_file().string())));
  EXPECT_EQ(result.exit_code, 1) << result.output;  // gradients are not the parameters
  EXPECT_THAT(result.output, HasSubstr("grads_plain.npz holds params (a saved model: not every "
                                       "name is under params/ or grads/; pass --kind-a grads if "
                                       "the file holds gradients)"));
  EXPECT_THAT(result.output, HasSubstr(": DIFFERENT; not compared: grads (only B holds grads)"));
  result = testing::run_command(
      parity(fmt::format("tensors diff {} {} --kind-a grads", plain, step_file().string())));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("grads_plain.npz holds grads (--kind-a grads)"));
  EXPECT_THAT(result.output, HasSubstr("parity tensors diff of grads: 4 names matched, 0 "
                                       "unmatched, 0 of 4 compared tensors outside rtol 0 atol "
                                       "0: same; not compared: params (only B holds params)"));
}

// Files that hold nothing to compare are bad input, whatever made them empty.
TEST_F(TensorsDiffGroups, FilesWithNothingToCompareAreRefused) {
  testing::TempDir dir;
  const std::string script = R"(
import sys
import numpy as np
np.savez(sys.argv[1] + '/empty.npz')
np.savez(sys.argv[1] + '/ints.npz', **{'0.weight': np.ones((2, 3), np.int32),
                                       '0.bias': np.ones(2, np.float32)})
)";
  std::ofstream(dir.path("write.py")) << script;
  auto result = testing::run_command(
      fmt::format("{} {} {}", kPython, dir.path("write.py").string(), dir.path().string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  write_safetensors(dir.path("empty.safetensors"), {});
  write_safetensors(dir.path("digests.safetensors"),
                    {{"replicas/param_digests", HostTensor::zeros(DType::I64, {8})}});
  const std::string init = (ddp_run() / "init.safetensors").string();
  const std::vector<std::pair<std::string, std::string>> refusals = {
      {"empty.npz", "empty.npz: holds no tensors, so there is nothing to import or compare"},
      {"empty.safetensors", "empty.safetensors: holds no tensors"},
      {"digests.safetensors",
       "digests.safetensors: holds only parity's bookkeeping (replicas/param_digests) and no "
       "'params/', 'grads/' or 'batch_stats/' tensor"},
      {"ints.npz",
       "ints.npz (params): tensor '0.weight' is I32; parameters and gradients must be floating "
       "point, F32 or F64, to be compared"},
  };
  for (const auto& [file, message] : refusals) {
    for (const std::string& order : {dir.path(file).string() + " " + init,
                                     init + " " + dir.path(file).string()}) {
      result = testing::run_command(parity("tensors diff " + order));
      EXPECT_EQ(result.exit_code, 2) << order << "\n" << result.output;
      EXPECT_THAT(result.output, HasSubstr(message)) << order;
    }
  }
}

}  // namespace
}  // namespace parity::interop
