// init.scheme = "torch" against real PyTorch: ddp_ref::torch_init_params gives, bit for bit,
// what torch.nn's own modules draw when a PyTorch user's model of the same modules, in the same
// order, is constructed after torch.manual_seed(seed). Known answers: torch_init_vectors.h,
// written by scripts/gen_torch_init_vectors.py with Debian's python3-torch 1.13.1
// (torch.__version__ 1.13.0a0) from interop/python/examples' MLP and ResNet; provenance there.
#include <gtest/gtest.h>

#include "known_torch_init.h"
#include "parity/common/case_spec.h"
#include "parity/ddp_ref/ddp_ref.h"

namespace parity::ddp_ref {
namespace {

NamedTensors torch_init_of(const std::string& case_name, uint64_t seed) {
  return torch_init_params(
      load_case(case_name, {"init.scheme=torch", "init.seed=" + std::to_string(seed)}));
}

TEST(TorchInit, Mlp2FmnistIsWhatPyTorchsLinearsDraw) {
  testing::expect_pytorchs_init(torch_init_of("mlp2-fmnist", 0), "mlp2-fmnist", 0);
}

TEST(TorchInit, TheGeneratorIsSeededWithInitSeed) {
  testing::expect_pytorchs_init(torch_init_of("mlp2-fmnist", 42), "mlp2-fmnist", 42);
}

// The ResNet's convolutions, BatchNorms and dense head, a residual's branch before its
// projection.
TEST(TorchInit, CnnFmnistIsWhatAPyTorchResNetDraws) {
  testing::expect_pytorchs_init(torch_init_of("cnn-fmnist", 0), "cnn-fmnist", 0);
}

}  // namespace
}  // namespace parity::ddp_ref
