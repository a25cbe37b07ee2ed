// init.scheme = "torch" (ddp_ref.h, torch_init_params): the values LibTorch's modules give
// themselves when ddp_ref builds the case's model.
//
// Every torch module initialises its parameters in its constructor, drawing from the default CPU
// generator, as its Python twin does in __init__ (torch 1.13, torch/nn/modules/):
//   - Linear, Conv2d: weight kaiming_uniform_(a = sqrt(5)), i.e. uniform(+-1/sqrt(fan_in)), then
//     bias uniform(+-1/sqrt(fan_in)) (linear.py, Linear.reset_parameters; conv.py,
//     _ConvNd.reset_parameters). LibTorch: ConvNdImpl::reset_parameters in
//     /usr/include/torch/csrc/api/include/torch/nn/modules/conv.h; LinearImpl::reset_parameters,
//     declared in .../modules/linear.h, is compiled into libtorch
//     (torch/csrc/api/src/nn/modules/linear.cpp, the same two draws).
//   - BatchNorm, LayerNorm: weight ones, bias zeros, no draw (batchnorm.py,
//     _NormBase.reset_parameters; normalization.py, LayerNorm.reset_parameters; LibTorch:
//     NormImplBase::reset_parameters in .../modules/batchnorm.h).
//   - MultiheadAttention: its out_proj Linear first (the two draws above), then in_proj_weight
//     xavier_uniform_, in_proj_bias and out_proj.bias zeros (activation.py,
//     MultiheadAttention.__init__ and _reset_parameters; LibTorch: MultiheadAttentionImpl::reset
//     and _reset_parameters, compiled into libtorch).
//   - The ViT's own parameters (layer_model.cpp, as torchvision's VisionTransformer): the class
//     token zeros, pos_embedding normal_(std=0.02), drawn where its layer is built.
// So seeding the generator and constructing the modules in ddp_ref's order (the case's layer
// order, a residual's branch before its projection: layer_model.h) draws what a PyTorch user's
// model constructed in that order draws after torch.manual_seed(seed), bit for bit: both run the
// same ATen kernels (tests/ddp_ref/torch_init_test.cpp, scripts/gen_torch_init_vectors.py).
#include "case_model.h"
#include "layer_model.h"
#include "parity/ddp_ref/ddp_ref.h"

namespace parity::ddp_ref {

NamedTensors torch_init_params(const CaseSpec& spec) {
  // What ddp_ref cannot train it does not initialise: a layer kind LayerModelImpl does not build
  // would reach its InternalError.
  check_layers_trainable(spec);
  torch::manual_seed(spec.init.seed);
  return export_canonical_params(*make_case_model(spec.model));
}

}  // namespace parity::ddp_ref
