#!/usr/bin/python3
"""Known answers for init.scheme = "torch" (ddp_ref::torch_init_params), from PyTorch itself.

Run with the real PyTorch (Debian's python3-torch 1.13.1, /usr/bin/python3):
    /usr/bin/python3 scripts/gen_torch_init_vectors.py > tests/ddp_ref/torch_init_vectors.h

Each model is written as a PyTorch user writes it, from torch.nn modules, and constructed right
after torch.manual_seed(seed): every module draws its own initial values in its constructor
(torch/nn/modules/linear.py, Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)), bias
uniform(+-1/sqrt(fan_in)); conv.py, _ConvNd.reset_parameters, the same; batchnorm.py and
normalization.py: weight ones, bias zeros; activation.py, MultiheadAttention: out_proj is a
Linear constructed first, then _reset_parameters draws in_proj_weight xavier_uniform_ and zeroes
in_proj_bias and out_proj.bias). The construction order is ddp_ref's: the case's layer order, a
residual block's branch before its projection (ddp_ref/src/layer_model.cpp, residual).
  - mlp2-fmnist: interop/python/examples/train_mlp2_ddp.py's model, Linear layers of the case's
    widths (ddp_ref/src/model.cpp's Mlp builds them in the same order);
  - cnn-fmnist: interop/python/examples/train_cnn_ddp.py's ResNet, torchvision's BasicBlock as
    that example writes it: conv1, bn1, conv2, bn2, then the downsample (the projection) inside
    the block. (torchvision's own ResNet differs: _make_layer builds the downsample before the
    block, and ResNet.__init__ redraws the conv weights kaiming_normal_(mode="fan_out").)
  - vit-fmnist: the ViT below, in the case's layer order: a Conv2d patch embedding, the position
    embedding drawn at construction as torchvision's VisionTransformer draws it
    (torchvision/models/vision_transformer.py, Encoder: normal_(std=0.02)), per encoder block
    LayerNorm, MultiheadAttention(E, heads), LayerNorm, Linear-GELU-Linear, then the final
    LayerNorm and the Linear head.
Values go to the canonical names and Flax's layouts (docs/model-layers.md): Linear weight
(out, in) -> kernel (in, out); Conv2d weight OIHW -> kernel HWIO; BatchNorm and LayerNorm weight
-> scale; MultiheadAttention's in_proj_weight (3E, E) -> its three row blocks, each transposed
to (E, E) and reshaped to the query, key and value kernels (E, H, E/H), in_proj_bias -> three
(H, E/H) biases, out_proj.weight (E, E) transposed and reshaped to the out kernel (H, E/H, E).

Each tensor is written as its shape, the 64-bit FNV-1a (common/base/include/parity/common/digest.h)
of its float32 values' little-endian bytes in the canonical layout, and its first values: the
digest checks every bit of ~320,000 values without storing them (about 1.3 MB of random floats),
the first values show how a mismatch starts.
"""
import os
import struct
import sys

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "interop", "python", "examples"))

import ddp_example  # noqa: E402 (needs the path above)
import gen_resnet_weights  # noqa: E402 (scripts/: torchvision's names -> cnn-fmnist's Flax paths)
import train_cnn_ddp  # noqa: E402
import train_mlp2_ddp  # noqa: E402

HEAD = 4  # first values written per tensor

# (case, seed): each case's own seed, and one other so that the test sees init.seed arrive.
CASES = [("mlp2-fmnist", 0), ("mlp2-fmnist", 42), ("cnn-fmnist", 0), ("vit-fmnist", 0)]


def build_vit(case):
    """vit-fmnist's layers as torch.nn modules, constructed in the case's order."""
    nn = torch.nn
    layers = case["model"]["layers"]
    height, width, channels = case["model"]["input"]
    patch, features = layers[0]["patch"], layers[0]["features"]
    assert [layer["kind"] for layer in layers[:2]] == ["patch_embed", "pos_embed"]
    assert [layer["kind"] for layer in layers[-3:]] == ["layer_norm", "mean_tokens", "dense"]
    tokens = (height // patch[0]) * (width // patch[1])

    def block(layer):
        norm, inner = layer["layers"]
        modules = [nn.LayerNorm(features, eps=norm["epsilon"])]
        if inner["kind"] == "attention":
            modules.append(nn.MultiheadAttention(features, inner["heads"], batch_first=True))
        else:
            assert inner["kind"] == "mlp_block"
            modules += [nn.Linear(features, inner["hidden"]),
                        nn.GELU(approximate="tanh" if inner["approximate"] else "none"),
                        nn.Linear(inner["hidden"], features)]
        return nn.Sequential(*modules)

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_proj = nn.Conv2d(channels, features, kernel_size=patch, stride=patch)
            self.pos_embedding = nn.Parameter(torch.empty(1, tokens, features).normal_(std=0.02))
            self.blocks = nn.ModuleList(block(layer) for layer in layers[2:-3])
            self.ln = nn.LayerNorm(features, eps=layers[-3]["epsilon"])
            self.head = nn.Linear(features, layers[-1]["features"])

    return ViT()


def canonical_mlp(model):
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    for i, linear in enumerate(linears):
        yield f"dense{i}.kernel", linear.weight.T
        yield f"dense{i}.bias", linear.bias


def canonical_cnn(model):
    for name, value in model.named_parameters():
        module, leaf = name.rsplit(".", 1)
        path = gen_resnet_weights.flax_module(module)
        if value.dim() == 4:
            yield f"{path}/kernel", value.permute(2, 3, 1, 0)  # OIHW -> HWIO
        elif value.dim() == 2:
            yield f"{path}/kernel", value.T
        elif leaf == "weight":
            assert "/BatchNorm_" in "/" + path
            yield f"{path}/scale", value
        else:
            yield f"{path}/bias", value


def canonical_vit(model):
    yield "Conv_0/kernel", model.conv_proj.weight.permute(2, 3, 1, 0)
    yield "Conv_0/bias", model.conv_proj.bias
    yield "AddPositionEmbs_0/pos_embedding", model.pos_embedding
    for i, block in enumerate(model.blocks):
        scope = f"Residual_{i}"
        yield f"{scope}/LayerNorm_0/scale", block[0].weight
        yield f"{scope}/LayerNorm_0/bias", block[0].bias
        if isinstance(block[1], torch.nn.MultiheadAttention):
            attention = block[1]
            e, h = attention.embed_dim, attention.num_heads
            path = f"{scope}/MultiHeadDotProductAttention_0"
            weights = attention.in_proj_weight.split(e)  # query, key, value rows
            biases = attention.in_proj_bias.split(e)
            for part, weight, bias in zip(("query", "key", "value"), weights, biases):
                yield f"{path}/{part}/kernel", weight.T.reshape(e, h, e // h)
                yield f"{path}/{part}/bias", bias.reshape(h, e // h)
            yield f"{path}/out/kernel", attention.out_proj.weight.T.reshape(h, e // h, e)
            yield f"{path}/out/bias", attention.out_proj.bias
        else:
            for j, linear in enumerate((block[1], block[3])):
                yield f"{scope}/MlpBlock_0/Dense_{j}/kernel", linear.weight.T
                yield f"{scope}/MlpBlock_0/Dense_{j}/bias", linear.bias
    yield "LayerNorm_0/scale", model.ln.weight
    yield "LayerNorm_0/bias", model.ln.bias
    yield "Dense_0/kernel", model.head.weight.T
    yield "Dense_0/bias", model.head.bias


MODELS = {
    "mlp2-fmnist": (lambda case: train_mlp2_ddp.build_model(torch, case), canonical_mlp),
    "cnn-fmnist": (lambda case: train_cnn_ddp.build_model(torch, case), canonical_cnn),
    "vit-fmnist": (build_vit, canonical_vit),
}


def fnv1a64(data):
    value = 14695981039346656037
    for byte in data:
        value = ((value ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return value


def cpp_tensor(name, value):
    values = value.detach().contiguous().to(torch.float32)
    flat = values.flatten().tolist()
    digest = fnv1a64(struct.pack("<%df" % len(flat), *flat))
    shape = ", ".join(str(size) for size in values.shape)
    head = ", ".join("%.9g" % v for v in flat[:HEAD])
    return '    {"%s", {%s}, 0x%016xull, {%s}},' % (name, shape, digest, head)


def main():
    print("// Generated by scripts/gen_torch_init_vectors.py with PyTorch %s; do not edit."
          % torch.__version__)
    print("// Provenance and what each value is: that script's docstring.")
    print("#pragma once\n")
    print("#include <cstdint>\n#include <vector>\n")
    print("namespace parity::ddp_ref::torch_init_vectors {\n")
    print("struct Tensor {\n  const char* name;  // canonical\n  std::vector<int64_t> shape;"
          "  // canonical (Flax's) layout\n  uint64_t fnv1a64;  // of the F32 bytes in that layout"
          "\n  std::vector<float> head;  // the first values\n};\n")
    print("struct KnownInit {\n  const char* case_name;\n  uint64_t seed;  // init.seed\n"
          "  std::vector<Tensor> tensors;  // in construction order\n};\n")
    print("inline const std::vector<KnownInit> kKnownInits = {")
    for case_name, seed in CASES:
        build, canonical = MODELS[case_name]
        case = ddp_example.load_case(os.path.join(REPO, "cases", case_name + ".toml"), [])
        torch.manual_seed(seed)
        model = build(case)
        print('  {"%s", %d, {' % (case_name, seed))
        for name, value in canonical(model):
            print(cpp_tensor(name, value))
        print("  }},")
    print("};\n")
    print("}  // namespace parity::ddp_ref::torch_init_vectors")


if __name__ == "__main__":
    main()
