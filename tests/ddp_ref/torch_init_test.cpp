// init.scheme = "torch" against real PyTorch: ddp_ref::torch_init_params gives, bit for bit,
// what torch.nn's own modules draw when a PyTorch user's model of the same modules, in the same
// order, is constructed after torch.manual_seed(seed). Known answers: torch_init_vectors.h,
// written by scripts/gen_torch_init_vectors.py with Debian's python3-torch 1.13.1
// (torch.__version__ 1.13.0a0) from interop/python/examples' MLP and ResNet and the script's
// torch.nn ViT; provenance there.
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

// The ViT: the patch embedding's Conv2d, pos_embedding's normal(std=0.02) drawn at construction,
// then each block's LayerNorm and MultiheadAttention (its out_proj Linear draws before
// in_proj_weight's xavier_uniform_; in_proj_bias and out_proj.bias end zero) or
// Linear-GELU-Linear, the final LayerNorm and the head.
TEST(TorchInit, VitFmnistIsWhatAPyTorchViTDraws) {
  testing::expect_pytorchs_init(torch_init_of("vit-fmnist", 0), "vit-fmnist", 0);
}

}  // namespace
}  // namespace parity::ddp_ref
