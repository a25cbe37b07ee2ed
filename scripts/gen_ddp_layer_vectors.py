#!/usr/bin/python3
"""Known answers for ddp_ref's layers model (ddp_ref/src/layer_model.h), from PyTorch.

Run with the real PyTorch (Debian's python3-torch 1.13.1, /usr/bin/python3):
    /usr/bin/python3 scripts/gen_ddp_layer_vectors.py > tests/ddp_ref/layer_model_vectors.h

Three small layers models on Fashion-MNIST, each a case file (its [model] layers; the other
sections are shared): kCnn, kVitClassToken and kVitMeanTokens.

Each model's batch is random rows and labels (the layers do not care). The parameters are
drawn in the canonical (Flax) layout (conv kernels HWIO, dense kernels (in, out), attention
kernels (E, H, D)) as float32 values, and the models are written here independently of
ddp_ref, in float64, under softmax cross-entropy.

kCnn has every layout conversion of the CNN kinds ddp_ref makes: a conv with SAME padding and
stride 2 (asymmetric pads (0, 1)), BatchNorm in training mode, a strided residual block with
an explicit-padding conv and a 1x1 projection, silu, avg_pool SAME with count_include_pad =
false, max_pool VALID with stride 2, flatten of an image, layer_norm, gelu (tanh form) and a
dense head, with torch.nn.functional on NCHW activations:
  - convolution weights are the HWIO kernels permuted to OIHW; SAME's asymmetric pads are an
    explicit F.pad;
  - avg_pool SAME (pads (0, 1)) with count_include_pad = false is torch's own
    count_include_pad=False with symmetric padding 1, cropped to its last 7 x 7 outputs;
  - flatten goes channels-last first (Flax flattens NHWC).

kVitClassToken and kVitMeanTokens are Vision Transformers with every Transformer kind: a
patch_embed (7 x 7 patches with a bias; 4 x 7 without), a class token read out at the end
(take_class_token) or mean pooling over the tokens (mean_tokens), position embeddings, a
pre-LayerNorm block of 4-head self-attention (head dims 2 and 4) and one of an MLP (gelu's erf
form in one, its tanh form in the other). Written here as a PyTorch user writes a ViT
(torchvision/models/vision_transformer.py): the patch embedding is F.conv2d with stride = patch
on the HWIO kernel permuted to OIHW, its (B, E, h, w) output flattened to (B, h * w, E); the
class token is expanded over the batch and concatenated first; attention is a real
torch.nn.MultiheadAttention(E, heads, batch_first=True) run through
torch.nn.utils.stateless.functional_call with its packed in_proj_weight (3E, E) and
in_proj_bias (3E) built from Flax's query, key and value kernels (E, H, D) and biases (H, D),
each reshaped to (E, H * D) and transposed, and out_proj.weight from the out kernel (H, D, E)
reshaped to (H * D, E) and transposed; so autograd carries the gradients back to the
Flax-layout leaves. LayerNorm is F.layer_norm, the MLP x @ kernel + bias around F.gelu.

Expected: the loss, every gradient in the canonical layout (the leaves are the canonical
tensors) and each BatchNorm's running statistics after the forward in Flax's convention,
computed directly from the batch's biased variance: mean = m * 0 + (1 - m) * batch_mean and
var = m * 1 + (1 - m) * biased_batch_var, m the case's momentum.
"""
import torch
import torch.nn.functional as F
from torch.nn.utils.stateless import functional_call

CASE_TOML = """\
[case]
name = "%(name)s"
description = "A small layers model for ddp_ref's tests (scripts/gen_ddp_layer_vectors.py)."

[model]
input = [28, 28, 1]
loss = "softmax_cross_entropy"
layers = [
%(layers)s]

[data]
dataset = "fashion-mnist"
per_replica_batch = 8
seed = 0
shuffle = true
drop_last = false

[parallel]
replicas = 2
processes = 1

[train]
steps = 3
optimizer = "sgd"
lr = 0.05
momentum = 0.9
record_steps = [0, 1, 2]

[init]
scheme = "jax-normal"
seed = 0
scale = 0.3
"""

CNN_LAYERS = """\
  { kind = "conv", features = 4, kernel = [3, 3], strides = [2, 2], padding = "SAME", use_bias = true },
  { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 },
  { kind = "relu" },
  { kind = "residual", layers = [
      { kind = "conv", features = 8, kernel = [3, 3], strides = [2, 2], padding = [[1, 1], [1, 1]], use_bias = false },
      { kind = "batch_norm", momentum = 0.8, epsilon = 1e-3 },
      { kind = "relu" },
      { kind = "conv", features = 8, kernel = [3, 3], padding = "SAME", use_bias = false },
      { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 } ], projection = [
      { kind = "conv", features = 8, kernel = [1, 1], strides = [2, 2], padding = "VALID", use_bias = false },
      { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 } ] },
  { kind = "silu" },
  { kind = "avg_pool", window = [2, 2], strides = [1, 1], padding = "SAME", count_include_pad = false },
  { kind = "max_pool", window = [3, 3], strides = [2, 2], padding = "VALID" },
  { kind = "flatten" },
  { kind = "layer_norm", epsilon = 1e-6 },
  { kind = "gelu", approximate = true },
  { kind = "dense", features = 10 },
"""

BATCH = 4

# Canonical names and shapes, in the order infer_model_shapes gives them.
CNN_PARAMS = [
    ("Conv_0/kernel", (3, 3, 1, 4)), ("Conv_0/bias", (4,)),
    ("BatchNorm_0/scale", (4,)), ("BatchNorm_0/bias", (4,)),
    ("Residual_0/Conv_0/kernel", (3, 3, 4, 8)),
    ("Residual_0/BatchNorm_0/scale", (8,)), ("Residual_0/BatchNorm_0/bias", (8,)),
    ("Residual_0/Conv_1/kernel", (3, 3, 8, 8)),
    ("Residual_0/BatchNorm_1/scale", (8,)), ("Residual_0/BatchNorm_1/bias", (8,)),
    ("Residual_0/Conv_2/kernel", (1, 1, 4, 8)),
    ("Residual_0/BatchNorm_2/scale", (8,)), ("Residual_0/BatchNorm_2/bias", (8,)),
    ("LayerNorm_0/scale", (72,)), ("LayerNorm_0/bias", (72,)),
    ("Dense_0/kernel", (72, 10)), ("Dense_0/bias", (10,)),
]


class Vit:
    """One of the two ViTs: its case layers, canonical parameters and torch forward."""

    def __init__(self, patch, width, patch_bias, class_token, heads, hidden, approximate,
                 epsilon):
        self.patch, self.width, self.patch_bias = patch, width, patch_bias
        self.class_token, self.heads, self.hidden = class_token, heads, hidden
        self.approximate, self.epsilon = approximate, epsilon
        self.tokens = (28 // patch[0]) * (28 // patch[1]) + (1 if class_token else 0)

    def layers(self):
        flag = lambda value: "true" if value else "false"
        lines = ['  { kind = "patch_embed", patch = [%d, %d], features = %d, use_bias = %s },'
                 % (self.patch[0], self.patch[1], self.width, flag(self.patch_bias))]
        if self.class_token:
            lines.append('  { kind = "class_token" },')
        lines += [
            '  { kind = "pos_embed" },',
            '  { kind = "residual", layers = [',
            '      { kind = "layer_norm", epsilon = %g },' % self.epsilon,
            '      { kind = "attention", heads = %d } ] },' % self.heads,
            '  { kind = "residual", layers = [',
            '      { kind = "layer_norm", epsilon = %g },' % self.epsilon,
            '      { kind = "mlp_block", hidden = %d, approximate = %s } ] },'
            % (self.hidden, flag(self.approximate)),
        ]
        if self.class_token:
            lines += ['  { kind = "layer_norm", epsilon = %g },' % self.epsilon,
                      '  { kind = "take_class_token" },']
        else:
            lines.append('  { kind = "mean_tokens" },')
        lines.append('  { kind = "dense", features = 10 },')
        return "\n".join(lines) + "\n"

    def params(self):
        """Canonical names and shapes, as flax.linen names them (docs/model-layers.md)."""
        e, h = self.width, self.heads
        out = [("Conv_0/kernel", (self.patch[0], self.patch[1], 1, e))]
        if self.patch_bias:
            out.append(("Conv_0/bias", (e,)))
        if self.class_token:
            out.append(("cls", (1, 1, e)))
        out.append(("AddPositionEmbs_0/pos_embedding", (1, self.tokens, e)))
        out += [("Residual_0/LayerNorm_0/scale", (e,)), ("Residual_0/LayerNorm_0/bias", (e,))]
        attention = "Residual_0/MultiHeadDotProductAttention_0/"
        for projection in ("query", "key", "value"):
            out += [(attention + projection + "/kernel", (e, h, e // h)),
                    (attention + projection + "/bias", (h, e // h))]
        out += [(attention + "out/kernel", (h, e // h, e)), (attention + "out/bias", (e,))]
        out += [("Residual_1/LayerNorm_0/scale", (e,)), ("Residual_1/LayerNorm_0/bias", (e,))]
        mlp = "Residual_1/MlpBlock_0/"
        out += [(mlp + "Dense_0/kernel", (e, self.hidden)), (mlp + "Dense_0/bias", (self.hidden,)),
                (mlp + "Dense_1/kernel", (self.hidden, e)), (mlp + "Dense_1/bias", (e,))]
        if self.class_token:
            out += [("LayerNorm_0/scale", (e,)), ("LayerNorm_0/bias", (e,))]
        out += [("Dense_0/kernel", (e, 10)), ("Dense_0/bias", (10,))]
        return out

    def attention(self, params, x, prefix):
        e = self.width
        attention = torch.nn.MultiheadAttention(e, self.heads, batch_first=True,
                                                dtype=torch.float64)
        in_kernels = [params[prefix + p + "/kernel"].reshape(e, e).t()
                      for p in ("query", "key", "value")]
        in_biases = [params[prefix + p + "/bias"].reshape(e) for p in ("query", "key", "value")]
        packed = {
            "in_proj_weight": torch.cat(in_kernels),
            "in_proj_bias": torch.cat(in_biases),
            "out_proj.weight": params[prefix + "out/kernel"].reshape(e, e).t(),
            "out_proj.bias": params[prefix + "out/bias"],
        }
        y, _ = functional_call(attention, packed, (x, x, x), {"need_weights": False})
        return y

    def forward(self, params, rows, stats):
        """The logits; `stats` stays empty (no BatchNorm)."""
        e, eps = self.width, self.epsilon
        x = rows.reshape(BATCH, 28, 28, 1).permute(0, 3, 1, 2)
        x = F.conv2d(x, params["Conv_0/kernel"].permute(3, 2, 0, 1), params.get("Conv_0/bias"),
                     stride=self.patch)
        x = x.flatten(2).transpose(1, 2)
        if self.class_token:
            x = torch.cat([params["cls"].expand(BATCH, -1, -1), x], dim=1)
        x = x + params["AddPositionEmbs_0/pos_embedding"]

        def norm(y, name):
            return F.layer_norm(y, (e,), params[name + "/scale"], params[name + "/bias"], eps)

        x = x + self.attention(params, norm(x, "Residual_0/LayerNorm_0"),
                               "Residual_0/MultiHeadDotProductAttention_0/")
        mlp = "Residual_1/MlpBlock_0/"
        y = norm(x, "Residual_1/LayerNorm_0")
        y = y @ params[mlp + "Dense_0/kernel"] + params[mlp + "Dense_0/bias"]
        y = F.gelu(y, approximate="tanh" if self.approximate else "none")
        x = x + y @ params[mlp + "Dense_1/kernel"] + params[mlp + "Dense_1/bias"]
        if self.class_token:
            x = norm(x, "LayerNorm_0")[:, 0]
        else:
            x = x.mean(dim=1)
        return x @ params["Dense_0/kernel"] + params["Dense_0/bias"]


def cnn_forward(params, rows, stats):
    def conv(x, name, stride, pads_hw):
        kernel = params[name + "/kernel"].permute(3, 2, 0, 1)  # HWIO -> OIHW
        bias = params.get(name + "/bias")
        (h_lo, h_hi), (w_lo, w_hi) = pads_hw
        return F.conv2d(F.pad(x, (w_lo, w_hi, h_lo, h_hi)), kernel, bias, stride=stride)

    def batch_norm(x, name, momentum, epsilon):
        channels = x.shape[1]
        running_mean = torch.zeros(channels, dtype=torch.float64)
        running_var = torch.ones(channels, dtype=torch.float64)
        out = F.batch_norm(x, running_mean, running_var, params[name + "/scale"],
                           params[name + "/bias"], training=True, momentum=1 - momentum,
                           eps=epsilon)
        batch = x.detach()
        stats[name + "/mean"] = (1 - momentum) * batch.mean(dim=(0, 2, 3))
        stats[name + "/var"] = momentum + (1 - momentum) * batch.var(dim=(0, 2, 3), unbiased=False)
        return out

    x = rows.reshape(BATCH, 28, 28, 1).permute(0, 3, 1, 2)
    x = conv(x, "Conv_0", 2, ((0, 1), (0, 1)))  # SAME, 28 -> 14: total pad 1 = (0, 1)
    x = F.relu(batch_norm(x, "BatchNorm_0", 0.9, 1e-5))
    y = conv(x, "Residual_0/Conv_0", 2, ((1, 1), (1, 1)))
    y = F.relu(batch_norm(y, "Residual_0/BatchNorm_0", 0.8, 1e-3))
    y = conv(y, "Residual_0/Conv_1", 1, ((1, 1), (1, 1)))
    y = batch_norm(y, "Residual_0/BatchNorm_1", 0.9, 1e-5)
    shortcut = conv(x, "Residual_0/Conv_2", 2, ((0, 0), (0, 0)))
    shortcut = batch_norm(shortcut, "Residual_0/BatchNorm_2", 0.9, 1e-5)
    x = F.silu(shortcut + y)
    x = F.avg_pool2d(x, 2, stride=1, padding=1, count_include_pad=False)[:, :, 1:, 1:]
    x = F.max_pool2d(x, 3, stride=2)
    x = x.permute(0, 2, 3, 1).reshape(BATCH, -1)
    x = F.layer_norm(x, (72,), params["LayerNorm_0/scale"], params["LayerNorm_0/bias"], 1e-6)
    x = F.gelu(x, approximate="tanh")
    return x @ params["Dense_0/kernel"] + params["Dense_0/bias"]


VIT_CLASS_TOKEN = Vit(patch=(7, 7), width=8, patch_bias=True, class_token=True, heads=4,
                      hidden=16, approximate=False, epsilon=1e-6)
VIT_MEAN_TOKENS = Vit(patch=(4, 7), width=16, patch_bias=False, class_token=False, heads=4,
                      hidden=12, approximate=True, epsilon=1e-5)

# (C++ name, case name, layers, canonical parameters, forward, seed)
MODELS = [
    ("kCnn", "ddp-layers-small", CNN_LAYERS, CNN_PARAMS, cnn_forward, 20261204),
    ("kVitClassToken", "ddp-vit-class-token", VIT_CLASS_TOKEN.layers(), VIT_CLASS_TOKEN.params(),
     VIT_CLASS_TOKEN.forward, 20261205),
    ("kVitMeanTokens", "ddp-vit-mean-tokens", VIT_MEAN_TOKENS.layers(), VIT_MEAN_TOKENS.params(),
     VIT_MEAN_TOKENS.forward, 20261206),
]


def cpp_floats(t):
    return "{" + ", ".join("%.9g" % v for v in t.flatten().tolist()) + "}"


def cpp_ints(values):
    return "{" + ", ".join(str(v) for v in values) + "}"


def cpp_named(entries):
    return "{\n" + "".join('        {"%s", %s, %s},\n' % (name, cpp_ints(values.shape),
                                                         cpp_floats(values))
                           for name, values in entries) + "    }"


def print_model(cpp_name, case_name, layers, param_shapes, forward, seed):
    gen = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in param_shapes:
        values = torch.randn(shape, generator=gen, dtype=torch.float32) * 0.5
        if name.endswith("/scale"):
            values = 1 + values * 0.2
        params[name] = values.to(torch.float64).requires_grad_()
    rows = torch.randn((BATCH, 784), generator=gen, dtype=torch.float32).to(torch.float64)
    labels = torch.randint(0, 10, (BATCH,), generator=gen)
    stats = {}
    outputs = forward(params, rows, stats)
    loss = F.cross_entropy(outputs, labels)
    loss.backward()

    print("inline const ModelVectors %s = {" % cpp_name)
    print('    "%s",' % cpp_name[1:])
    print('    "%s",' % case_name)
    print('    R"toml(%s)toml",' % (CASE_TOML % {"name": case_name, "layers": layers}))
    print("    %d," % BATCH)
    print("    %s," % cpp_floats(rows))
    print("    %s," % cpp_ints(labels.tolist()))
    print("    %s," % cpp_named((name, params[name].detach()) for name, _ in param_shapes))
    print("    %.17g," % loss.item())
    print("    %s," % cpp_floats(outputs.detach()))
    print("    %s," % cpp_named((name, params[name].grad) for name, _ in param_shapes))
    print("    %s," % cpp_named(stats.items()))
    print("};\n")


def main():
    print("// Generated by scripts/gen_ddp_layer_vectors.py with PyTorch %s; do not edit."
          % torch.__version__)
    print("// Provenance and what each value is: that script's docstring.")
    print("#pragma once\n")
    print("#include <cstdint>\n#include <vector>\n")
    print("namespace parity::ddp_ref::layer_vectors {\n")
    print("struct Named {\n  const char* name;\n  std::vector<int64_t> shape;\n"
          "  std::vector<float> values;\n};\n")
    print("// One model's case file, a batch, its canonical parameters, and PyTorch's training\n"
          "// forward and backward on them.\n"
          "struct ModelVectors {\n  const char* name;  // for test names\n  const char* case_name;\n"
          "  const char* case_toml;\n  int64_t batch;\n"
          "  std::vector<float> rows;  // [batch, 784]\n  std::vector<int64_t> labels;\n"
          "  std::vector<Named> params;\n  double loss;\n"
          "  std::vector<float> outputs;  // [batch, 10]\n  std::vector<Named> grads;\n"
          "  std::vector<Named> batch_stats;  // after the forward, Flax's convention\n};\n")
    for model in MODELS:
        print_model(*model)
    print("}  // namespace parity::ddp_ref::layer_vectors")


if __name__ == "__main__":
    main()
