// `parity init CASE --set init.scheme=torch` writes ddp_ref's torch initialisation: PyTorch's own
// values (known_torch_init.h), with the scheme and seed in the file's metadata.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "command.h"
#include "known_torch_init.h"
#include "parity/common/tensor_file.h"

namespace parity {
namespace {

const std::string kParity = PARITY_EXECUTABLE;

TEST(TorchInitCli, InitWritesPyTorchsValuesAndNamesTheScheme) {
  const auto path = testing::fresh_directory("torch-init-cli") / "init.safetensors";
  const auto result = testing::run_command(
      fmt::format("{} init cnn-fmnist --set init.scheme=torch --out {}", kParity, path.string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const SafetensorsFile file = read_safetensors(path);
  EXPECT_EQ(file.metadata.at("case"), "cnn-fmnist");
  EXPECT_EQ(file.metadata.at("scheme"), "torch");
  EXPECT_EQ(file.metadata.at("seed"), "0");
  testing::expect_pytorchs_init(file.tensors, "cnn-fmnist", 0);
}

}  // namespace
}  // namespace parity
