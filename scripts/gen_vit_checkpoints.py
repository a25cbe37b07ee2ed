#!/usr/bin/python3
"""vit-fmnist's Vision Transformer as a PyTorch user writes it, and the same values in Flax's names
and layouts: the fixtures of tests/interop/vit_param_names_test.cpp.

Run with the real PyTorch (Debian's python3-torch 1.13, /usr/bin/python3; torchvision is not
installed, so its module tree is written out below):
    /usr/bin/python3 scripts/gen_vit_checkpoints.py tests/data/weights

Writes four safetensors files:
  - vit_torch.safetensors: the state_dict of cases/vit-fmnist.toml's model with torchvision's
    module names (torchvision/models/vision_transformer.py, VisionTransformer: conv_proj,
    encoder.pos_embedding, encoder.layers.encoder_layer_<i>.{ln_1, self_attention, ln_2, mlp},
    encoder.ln, heads.head; nn.MultiheadAttention's packed in_proj_weight (3E, E)), with the
    current MLP names mlp.0 / mlp.3 (torchvision's MLPBlock since pytorch/vision#6053) and no
    class token: the case pools the tokens by their mean;
  - vit_flax.safetensors: the same values as Flax's variables flattened with '/'
    (flax.traverse_util.flatten_dict(sep='/')) under the case's module paths
    (params/Residual_0/MultiHeadDotProductAttention_0/query/kernel, ...);
  - vit_cls_torch.safetensors / vit_cls_flax.safetensors: the same for a smaller variant with
    torchvision's class token (class_token (1, 1, E) -> cls, position embeddings over the class
    token too, the class token's output classified) and the legacy MLP names mlp.linear_1 /
    mlp.linear_2 (torchvision before #6053). The variant is vit-fmnist with the layers of
    CLS_LAYERS; the files carry that override in their metadata ("case_overrides"), which the
    test passes to --set.

Every parameter is drawn from a seeded normal (torch's own initialisation leaves biases, the class
token and torchvision's head at zero, which would hide a misplaced tensor). The torch -> Flax
conversion is written out below by hand, as the oracle the C++ mapping must reproduce:
  - Conv2d weight (out, in, kh, kw) -> Conv kernel (kh, kw, in, out);
  - Linear weight (out, in) -> Dense kernel (in, out); LayerNorm weight -> scale;
  - MultiheadAttention: in_proj_weight's row blocks q, k, v (torch/nn/functional.py,
    _in_projection_packed: w.chunk(3)) transposed to (E, E) and reshaped to DenseGeneral's
    (E, H, E/H) (flax/linen/attention.py, MultiHeadDotProductAttention: features=(num_heads,
    head_dim)); torch splits heads as view(..., H, E/H) on the projected features
    (multi_head_attention_forward), so feature h * E/H + d is head h, element d in both;
    in_proj_bias's blocks -> (H, E/H); out_proj.weight (E, E) transposed and reshaped to the out
    kernel (H, E/H, E) (DenseGeneral(axis=(-2, -1))), out_proj.bias -> out/bias.
And checked here before anything is written: the Flax-layout values, run through Flax's formulas
(the einsums of flax/linen/attention.py and linear.py, written with torch as the array library,
since JAX and Flax are not installable here), give the torch model's output to float64 round-off.
"""
import collections
import math
import os
import sys

import numpy as np
import torch
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "interop", "python", "examples"))

import ddp_example  # noqa: E402 (needs the path above; puts interop/python on the path)
from parity_log_common import write_safetensors  # noqa: E402

# The class-token variant: 7x7 patches (16 tokens and the class token) of width 16, one encoder
# block of 2 heads, classified from the class token's output.
CLS_LAYERS = (
    '[{kind = "patch_embed", patch = [7, 7], features = 16}, {kind = "class_token"}, '
    '{kind = "pos_embed"}, '
    '{kind = "residual", layers = [{kind = "layer_norm", epsilon = 1e-6}, '
    '{kind = "attention", heads = 2}]}, '
    '{kind = "residual", layers = [{kind = "layer_norm", epsilon = 1e-6}, '
    '{kind = "mlp_block", hidden = 32, approximate = false}]}, '
    '{kind = "layer_norm", epsilon = 1e-6}, {kind = "take_class_token"}, '
    '{kind = "dense", features = 10}]')


# ---- the case's ViT as numbers ----------------------------------------------------------------

def vit_config(layers):
    """The dimensions of a torchvision-shaped ViT from the case's layer list: patch_embed,
    class_token (optional), pos_embed, pre-LayerNorm blocks as residual pairs (layer_norm,
    attention) and (layer_norm, mlp_block), a final layer_norm, a pooling, a dense head."""
    kinds = [layer["kind"] for layer in layers]
    cls = kinds[1] == "class_token"
    blocks = layers[2 + cls:-3]
    assert kinds[:2 + cls] == ["patch_embed"] + ["class_token"] * cls + ["pos_embed"], kinds
    assert kinds[-3:] == ["layer_norm", "take_class_token" if cls else "mean_tokens", "dense"]
    assert len(blocks) % 2 == 0
    attention, mlp = blocks[0]["layers"][1], blocks[1]["layers"][1]
    for i in range(0, len(blocks), 2):
        assert [l["kind"] for l in blocks[i]["layers"]] == ["layer_norm", "attention"]
        assert [l["kind"] for l in blocks[i + 1]["layers"]] == ["layer_norm", "mlp_block"]
        assert not blocks[i + 1]["layers"][1]["approximate"]  # nn.GELU() is the exact form
    epsilons = {l["epsilon"] for l in layers if l["kind"] == "layer_norm"}
    epsilons |= {b["layers"][0]["epsilon"] for b in blocks}
    assert len(epsilons) == 1
    return {"patch": layers[0]["patch"][0], "width": layers[0]["features"],
            "blocks": len(blocks) // 2, "heads": attention["heads"], "hidden": mlp["hidden"],
            "classes": layers[-1]["features"], "cls": cls, "epsilon": epsilons.pop()}


# ---- the torch model: torchvision's module tree, written out ----------------------------------

class MLPBlock(nn.Sequential):
    """torchvision's MLPBlock (ops.misc.MLP): Linear, GELU, Dropout, Linear, Dropout, so the two
    Linear layers are mlp.0 and mlp.3."""

    def __init__(self, width, hidden):
        super().__init__(nn.Linear(width, hidden), nn.GELU(), nn.Dropout(0.0),
                         nn.Linear(hidden, width), nn.Dropout(0.0))


class LegacyMLPBlock(nn.Sequential):
    """torchvision's MLPBlock before pytorch/vision#6053: linear_1, act, dropout_1, linear_2,
    dropout_2 (the names its _load_from_state_dict still renames from)."""

    def __init__(self, width, hidden):
        super().__init__(collections.OrderedDict([
            ("linear_1", nn.Linear(width, hidden)), ("act", nn.GELU()),
            ("dropout_1", nn.Dropout(0.0)), ("linear_2", nn.Linear(hidden, width)),
            ("dropout_2", nn.Dropout(0.0))]))


class EncoderBlock(nn.Module):
    def __init__(self, config, mlp_class):
        super().__init__()
        width = config["width"]
        self.ln_1 = nn.LayerNorm(width, eps=config["epsilon"])
        self.self_attention = nn.MultiheadAttention(width, config["heads"], batch_first=True)
        self.ln_2 = nn.LayerNorm(width, eps=config["epsilon"])
        self.mlp = mlp_class(width, config["hidden"])

    def forward(self, x):
        y = self.ln_1(x)
        x = x + self.self_attention(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    def __init__(self, config, tokens, mlp_class):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, tokens, config["width"]))
        self.layers = nn.Sequential(collections.OrderedDict(
            (f"encoder_layer_{i}", EncoderBlock(config, mlp_class))
            for i in range(config["blocks"])))
        self.ln = nn.LayerNorm(config["width"], eps=config["epsilon"])

    def forward(self, x):
        return self.ln(self.layers(x + self.pos_embedding))


class VisionTransformer(nn.Module):
    def __init__(self, config, mlp_class):
        super().__init__()
        self.config = config
        patch, width = config["patch"], config["width"]
        self.conv_proj = nn.Conv2d(1, width, kernel_size=patch, stride=patch)
        tokens = (28 // patch) ** 2
        if config["cls"]:
            self.class_token = nn.Parameter(torch.zeros(1, 1, width))
            tokens += 1
        self.encoder = Encoder(config, tokens, mlp_class)
        self.heads = nn.Sequential(collections.OrderedDict(
            [("head", nn.Linear(width, config["classes"]))]))

    def forward(self, images):  # (n, 1, 28, 28)
        x = self.conv_proj(images).flatten(2).transpose(1, 2)  # (n, tokens, width)
        if self.config["cls"]:
            x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.encoder(x)
        return self.heads(x[:, 0] if self.config["cls"] else x.mean(dim=1))


# ---- torch names -> the case's Flax paths, by hand --------------------------------------------

def to_flax(state, config):
    """{flax name: array} from the torch state_dict, as flax.linen names vit-fmnist's modules
    (docs/model-layers.md): encoder layer i's attention half is Residual_2i, its MLP half
    Residual_2i+1; encoder.ln is the top-level LayerNorm_0, heads.head Dense_0."""
    width, heads = config["width"], config["heads"]
    head_dim = width // heads
    unused = set(state)

    def take(name):
        unused.discard(name)
        return state[name]

    flax = {"params/Conv_0/kernel": take("conv_proj.weight").transpose(2, 3, 1, 0),
            "params/Conv_0/bias": take("conv_proj.bias"),
            "params/AddPositionEmbs_0/pos_embedding": take("encoder.pos_embedding"),
            "params/LayerNorm_0/scale": take("encoder.ln.weight"),
            "params/LayerNorm_0/bias": take("encoder.ln.bias"),
            "params/Dense_0/kernel": take("heads.head.weight").T,
            "params/Dense_0/bias": take("heads.head.bias")}
    if config["cls"]:
        flax["params/cls"] = take("class_token")
    mlp_names = ("mlp.linear_1", "mlp.linear_2") if config["cls"] else ("mlp.0", "mlp.3")
    for i in range(config["blocks"]):
        block = f"encoder.layers.encoder_layer_{i}."
        attention_half, mlp_half = f"params/Residual_{2 * i}/", f"params/Residual_{2 * i + 1}/"
        for half, norm in ((attention_half, "ln_1"), (mlp_half, "ln_2")):
            flax[half + "LayerNorm_0/scale"] = take(block + norm + ".weight")
            flax[half + "LayerNorm_0/bias"] = take(block + norm + ".bias")
        attention = attention_half + "MultiHeadDotProductAttention_0/"
        in_weight = take(block + "self_attention.in_proj_weight")
        in_bias = take(block + "self_attention.in_proj_bias")
        for j, projection in enumerate(("query", "key", "value")):
            rows = slice(j * width, (j + 1) * width)
            flax[attention + projection + "/kernel"] = \
                in_weight[rows].T.reshape(width, heads, head_dim)
            flax[attention + projection + "/bias"] = in_bias[rows].reshape(heads, head_dim)
        flax[attention + "out/kernel"] = \
            take(block + "self_attention.out_proj.weight").T.reshape(heads, head_dim, width)
        flax[attention + "out/bias"] = take(block + "self_attention.out_proj.bias")
        for dense, torch_name in zip(("Dense_0", "Dense_1"), mlp_names):
            flax[f"{mlp_half}MlpBlock_0/{dense}/kernel"] = take(f"{block}{torch_name}.weight").T
            flax[f"{mlp_half}MlpBlock_0/{dense}/bias"] = take(f"{block}{torch_name}.bias")
    assert not unused, f"torch tensors with no Flax twin: {sorted(unused)}"
    return {name: np.ascontiguousarray(value) for name, value in flax.items()}


# ---- the check: Flax's formulas on the Flax-layout values -------------------------------------

def flax_forward(flax, config, images_nhwc):
    """The case's model from the Flax-layout values, as flax.linen computes it (float64)."""
    p = {name[len("params/"):]: torch.from_numpy(value).double() for name, value in flax.items()}
    patch, width, heads = config["patch"], config["width"], config["heads"]
    n, size = images_nhwc.shape[0], images_nhwc.shape[1]
    grid = size // patch

    def layer_norm(x, path):  # flax/linen/normalization.py: biased variance over the features
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + config["epsilon"]) * p[path + "/scale"] + \
            p[path + "/bias"]

    def dense(x, path):  # flax/linen/linear.py Dense: x @ kernel (in, out) + bias
        return x @ p[path + "/kernel"] + p[path + "/bias"]

    def attention(x, path):  # flax/linen/attention.py, MultiHeadDotProductAttention
        q, k, v = (torch.einsum("nte,ehd->nthd", x, p[f"{path}/{name}/kernel"]) +
                   p[f"{path}/{name}/bias"] for name in ("query", "key", "value"))
        q = q / math.sqrt(width // heads)  # dot_product_attention_weights scales the query
        weights = torch.softmax(torch.einsum("nqhd,nkhd->nhqk", q, k), dim=-1)
        mixed = torch.einsum("nhqk,nkhd->nqhd", weights, v)
        return torch.einsum("nqhd,hde->nqe", mixed, p[path + "/out/kernel"]) + p[path + "/out/bias"]

    # nn.Conv(kernel=strides=patch, VALID) on NHWC, then the (h, w) grid as tokens, row-major.
    patches = images_nhwc.reshape(n, grid, patch, grid, patch, 1).permute(0, 1, 3, 2, 4, 5)
    x = torch.einsum("nijabc,abco->nijo", patches, p["Conv_0/kernel"]) + p["Conv_0/bias"]
    x = x.reshape(n, grid * grid, width)
    if config["cls"]:
        x = torch.cat([p["cls"].expand(n, 1, width), x], dim=1)
    x = x + p["AddPositionEmbs_0/pos_embedding"]
    for i in range(config["blocks"]):
        attention_half, mlp_half = f"Residual_{2 * i}/", f"Residual_{2 * i + 1}/"
        x = x + attention(layer_norm(x, attention_half + "LayerNorm_0"),
                          attention_half + "MultiHeadDotProductAttention_0")
        y = dense(layer_norm(x, mlp_half + "LayerNorm_0"), mlp_half + "MlpBlock_0/Dense_0")
        x = x + dense(torch.nn.functional.gelu(y), mlp_half + "MlpBlock_0/Dense_1")  # exact GELU
    x = layer_norm(x, "LayerNorm_0")
    return dense(x[:, 0] if config["cls"] else x.mean(dim=1), "Dense_0")


def write_pair(out_dir, stem, case_overrides, mlp_class, seed):
    case = ddp_example.load_case(os.path.join(REPO, "cases", "vit-fmnist.toml"), case_overrides)
    config = vit_config(case["model"]["layers"])
    torch.manual_seed(seed)
    model = VisionTransformer(config, mlp_class)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    state = {name: value.detach().numpy().copy() for name, value in model.state_dict().items()}
    flax = to_flax(state, config)

    images = torch.rand(3, 28, 28, 1, dtype=torch.float64)
    with torch.no_grad():
        expected = model.double()(images.permute(0, 3, 1, 2))
        got = flax_forward(flax, config, images)
    error = (got - expected).abs().max().item()
    assert error < 1e-9, f"{stem}: the Flax-layout values compute another model ({error})"

    metadata = {"producer": "scripts/gen_vit_checkpoints.py", "torch_version": torch.__version__}
    if case_overrides:
        metadata["case_overrides"] = case_overrides[0]
    write_safetensors(os.path.join(out_dir, stem + "_torch.safetensors"), state, metadata)
    write_safetensors(os.path.join(out_dir, stem + "_flax.safetensors"), flax, metadata)
    print(f"{stem}: {len(state)} tensors, Flax formulas vs torch max |d| {error:.2e}")


def main():
    out_dir = sys.argv[1]
    write_pair(out_dir, "vit", [], MLPBlock, seed=0)
    write_pair(out_dir, "vit_cls", [f"model.layers={CLS_LAYERS}"], LegacyMLPBlock, seed=1)


if __name__ == "__main__":
    main()
