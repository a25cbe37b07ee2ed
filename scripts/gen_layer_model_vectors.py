#!/usr/bin/python3
"""Known answers for the engine's layers models (engine_trainer/src/models/layer_model.h), from PyTorch.

Run with the real PyTorch (Debian's python3-torch 1.13.1, /usr/bin/python3):
    /usr/bin/python3 scripts/gen_layer_model_vectors.py > tests/engine_trainer/layer_model_vectors.h

Each model is a [model] layer list as a case file writes it (docs/model-layers.md), run here by a
small interpreter of the same list in torch, in float64, with parameters in Flax's layout and
named as flax.linen auto-names them (Class_i, one counter per class within each parent; a
residual's projection continues its block's counters). Inputs and parameters are seeded
torch.randn values rounded to float32, so that the test can read them through float32 tensor
files exactly. Printed per model: the input batch (NHWC rows), labels, parameters, the training
forward's logits and mean softmax cross-entropy, the gradient of that loss for every parameter,
the updated BatchNorm statistics, and the evaluation forward's logits with those statistics.

Conversions from torch's conventions to Flax's:
  - Activations: torch is NCHW; the input rows are reshaped NHWC (as the engine reshapes them)
    and permuted to NCHW. flatten permutes back to NHWC first, as Flax's reshape flattens.
  - Conv kernels are HWIO leaves, permuted to torch's OIHW inside the forward (so the gradients
    come out HWIO); dense kernels are (in, out) leaves, used as x @ kernel.
  - "SAME" padding is lax.padtype_to_pads's (the odd position of an odd total on the high side),
    applied with F.pad, since F.conv2d's own padding is symmetric; explicit pairs likewise.
    max_pool pads with -inf, avg_pool with zeros (count_include_pad=True).
  - BatchNorm: F.batch_norm(training=True, momentum=1 - m) normalises with the batch's biased
    variance as Flax does; its running_var keeps the unbiased variance, so the expected Flax
    statistics (ra = m * ra + (1 - m) * batch, biased variance) are computed here from the batch
    and checked against torch's running_var rescaled by n / (n - 1). Running statistics start
    at mean 0, var 1 (flax.linen.BatchNorm's init).
  - gelu with approximate=true is F.gelu(approximate="tanh") (jax.nn.gelu's default form).
  - layer_norm: F.layer_norm with the case's epsilon over the last axis.
  - Tokens are (batch, tokens, features) in both. patch_embed is the conv with stride = patch,
    its NCHW output permuted to NHWC and reshaped to tokens (Flax's reshape of the patch grid).
    attention runs torch's own F.multi_head_attention_forward, its packed in_proj_weight (3E, E)
    built from Flax's query/key/value kernels (E, H, E/H) reshaped to (E, E) and transposed,
    out_proj.weight from the out kernel (H, E/H, E) likewise.
"""
import math

import torch
import torch.nn.functional as F

from gen_conv_pool_vectors import cpp_ints, cpp_values

torch.set_default_dtype(torch.float64)

# Shared by both models: conv's padding forms, pools, activations, residuals with and without a
# projection, norms, and both heads (flatten and global average pooling).
MODELS = [
    ("kPoolsAndLayerNorm", 11, [28, 28, 1], 2, """\
  { kind = "conv", features = 3, kernel = [3, 3], strides = [2, 2], padding = "SAME" },
  { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 },
  { kind = "relu" },
  { kind = "residual", layers = [
      { kind = "conv", features = 3, kernel = [3, 3], padding = "SAME", use_bias = false },
      { kind = "batch_norm", momentum = 0.8, epsilon = 1e-3 },
      { kind = "gelu", approximate = true } ] },
  { kind = "residual", layers = [
      { kind = "conv", features = 4, kernel = [3, 3], padding = [[1, 1], [1, 1]], use_bias = false },
      { kind = "silu" } ], projection = [
      { kind = "conv", features = 4, kernel = [1, 1], padding = "VALID", use_bias = false },
      { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 } ] },
  { kind = "max_pool", window = [2, 2], strides = [2, 2] },
  { kind = "avg_pool", window = [2, 2], strides = [2, 2], padding = "SAME" },
  { kind = "tanh" },
  { kind = "flatten" },
  { kind = "layer_norm", epsilon = 1e-5 },
  { kind = "dense", features = 10 },
"""),
    ("kResNetHead", 12, [28, 28, 1], 3, """\
  { kind = "conv", features = 4, kernel = [3, 3], padding = "SAME", use_bias = false },
  { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 },
  { kind = "relu" },
  { kind = "residual", layers = [
      { kind = "conv", features = 6, kernel = [3, 3], strides = [2, 2], padding = [[1, 1], [1, 1]], use_bias = false },
      { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 },
      { kind = "relu" },
      { kind = "conv", features = 6, kernel = [3, 3], padding = "SAME", use_bias = false },
      { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 } ], projection = [
      { kind = "conv", features = 6, kernel = [1, 1], strides = [2, 2], padding = "VALID", use_bias = false },
      { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 } ] },
  { kind = "relu" },
  { kind = "dropout", rate = 0.0 },
  { kind = "global_avg_pool" },
  { kind = "dense", features = 10 },
"""),
    # Transformer kinds: a class token read out at the end, then mean pooling over tokens.
    ("kViTClassToken", 13, [28, 28, 1], 2, """\
  { kind = "patch_embed", patch = [7, 7], features = 8 },
  { kind = "class_token" },
  { kind = "pos_embed" },
  { kind = "residual", layers = [
      { kind = "layer_norm", epsilon = 1e-6 },
      { kind = "attention", heads = 2 } ] },
  { kind = "residual", layers = [
      { kind = "layer_norm", epsilon = 1e-6 },
      { kind = "mlp_block", hidden = 16, approximate = false } ] },
  { kind = "layer_norm", epsilon = 1e-6 },
  { kind = "take_class_token" },
  { kind = "dense", features = 10 },
"""),
    ("kViTMeanTokens", 14, [28, 28, 1], 3, """\
  { kind = "patch_embed", patch = [4, 7], features = 8, use_bias = false },
  { kind = "pos_embed" },
  { kind = "residual", layers = [
      { kind = "layer_norm", epsilon = 1e-5 },
      { kind = "attention", heads = 4 } ] },
  { kind = "residual", layers = [
      { kind = "layer_norm", epsilon = 1e-5 },
      { kind = "mlp_block", hidden = 12, approximate = true } ] },
  { kind = "mean_tokens" },
  { kind = "dense", features = 10 },
"""),
]

STRUCTS = """\
struct NamedValues {
  std::string name;  // canonical: "Residual_0/Conv_0/kernel", "BatchNorm_0/mean"
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// A layers model's training and evaluation forward on one batch, and the loss's gradients.
struct LayerModelVector {
  std::string layers;  // the case file's [model] layers entries, one per line
  std::vector<int64_t> input;
  int64_t batch;
  std::vector<double> x;  // [batch, prod(input)], NHWC rows, float32-exact
  std::vector<int32_t> y;
  std::vector<NamedValues> params;   // float32-exact
  std::vector<double> train_logits;  // [batch, 10]
  double loss;                       // mean softmax cross-entropy of train_logits
  std::vector<NamedValues> grads;
  std::vector<NamedValues> batch_stats;  // after the training forward, Flax's convention
  std::vector<double> eval_logits;       // the evaluation forward with those statistics
};
"""


def parse_layers(text):
    """The case's TOML layer entries as Python dicts (the subset of TOML the list uses)."""
    python = (text.replace("=", ":").replace("true", "True").replace("false", "False"))
    python = "[" + python + "]"
    for key in ["kind", "features", "kernel", "strides", "padding", "use_bias", "momentum",
                "epsilon", "approximate", "layers", "projection", "window", "rate", "patch",
                "heads", "hidden"]:
        python = python.replace(" %s :" % key, " '%s':" % key)
    return eval(python)


def f32(t):
    return t.float().double()


def same_pads(size, window, stride):
    out = -(-size // stride)
    total = max((out - 1) * stride + window - size, 0)
    return total // 2, total - total // 2


def pads_of(layer, height, width, window):
    strides = layer.get("strides", [1, 1])
    padding = layer.get("padding", "VALID")
    if padding == "SAME":
        return [same_pads(height, window[0], strides[0]), same_pads(width, window[1], strides[1])]
    if padding == "VALID":
        return [(0, 0), (0, 0)]
    return [tuple(p) for p in padding]


def pad(x, pads, value=0.0):
    (lo_h, hi_h), (lo_w, hi_w) = pads
    return F.pad(x, (lo_w, hi_w, lo_h, hi_h), value=value)


class Namer:
    CLASSES = {"dense": "Dense", "conv": "Conv", "batch_norm": "BatchNorm",
               "layer_norm": "LayerNorm", "residual": "Residual", "dropout": "Dropout",
               "patch_embed": "Conv", "pos_embed": "AddPositionEmbs",
               "attention": "MultiHeadDotProductAttention", "mlp_block": "MlpBlock"}

    def __init__(self):
        self.counters = {}

    def next(self, kind):
        cls = self.CLASSES.get(kind)
        if cls is None:
            return None
        i = self.counters.get(cls, 0)
        self.counters[cls] = i + 1
        return "%s_%d" % (cls, i)


class Model:
    """Interprets a layer list; creates parameters on the first (init) pass."""

    def __init__(self, layers, seed):
        self.layers = layers
        self.gen = torch.Generator().manual_seed(seed)
        self.params = {}       # name -> leaf tensor (Flax layout)
        self.stats = {}        # name -> tensor
        self.new_stats = {}
        self.train = True

    def param(self, name, shape, kind):
        if name not in self.params:
            values = torch.randn(shape, generator=self.gen)
            if kind == "kernel":
                fan_in = math.prod(shape[:-1]) if len(shape) != 3 or name.endswith("out/kernel") \
                    else shape[0]
                values = values / math.sqrt(fan_in)
            elif kind == "scale":
                values = 1 + 0.2 * values
            else:
                values = 0.2 * values
            self.params[name] = f32(values).requires_grad_()
        return self.params[name]

    def run(self, x, train):
        self.train = train
        self.new_stats = {}
        return self.apply_all(self.layers, x, "", Namer())

    def apply_all(self, layers, x, scope, namer):
        for layer in layers:
            name = namer.next(layer["kind"])
            x = self.apply(layer, x, scope + name if name else None, scope)
        return x

    def apply(self, layer, x, name, scope):
        kind = layer["kind"]
        if kind in TOKEN_KINDS:
            return self.token_layer(layer, x, name, scope)
        if kind == "conv":
            kh, kw = layer["kernel"]
            kernel = self.param(name + "/kernel", (kh, kw, x.shape[1], layer["features"]), "kernel")
            pads = pads_of(layer, x.shape[2], x.shape[3], layer["kernel"])
            y = F.conv2d(pad(x, pads), kernel.permute(3, 2, 0, 1),
                         stride=layer.get("strides", [1, 1]))
            if layer.get("use_bias", True):
                y = y + self.param(name + "/bias", (layer["features"],), "bias").view(1, -1, 1, 1)
            return y
        if kind == "dense":
            kernel = self.param(name + "/kernel", (x.shape[-1], layer["features"]), "kernel")
            y = x @ kernel
            if layer.get("use_bias", True):
                y = y + self.param(name + "/bias", (layer["features"],), "bias")
            return y
        if kind == "batch_norm":
            return self.batch_norm(layer, x, name)
        if kind == "layer_norm":
            scale = self.param(name + "/scale", (x.shape[-1],), "scale")
            bias = self.param(name + "/bias", (x.shape[-1],), "bias")
            return F.layer_norm(x, (x.shape[-1],), scale, bias, eps=layer["epsilon"])
        if kind == "max_pool":
            pads = pads_of(layer, x.shape[2], x.shape[3], layer["window"])
            return F.max_pool2d(pad(x, pads, -math.inf), layer["window"], layer["strides"])
        if kind == "avg_pool":
            pads = pads_of(layer, x.shape[2], x.shape[3], layer["window"])
            return F.avg_pool2d(pad(x, pads), layer["window"], layer["strides"])
        if kind == "global_avg_pool":
            return x.mean(dim=(2, 3))
        if kind == "flatten":
            return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)
        if kind == "relu":
            return torch.relu(x)
        if kind == "tanh":
            return torch.tanh(x)
        if kind == "silu":
            return F.silu(x)
        if kind == "gelu":
            return F.gelu(x, approximate="tanh" if layer["approximate"] else "none")
        if kind == "dropout":
            assert layer["rate"] == 0
            return x
        if kind == "residual":
            namer = Namer()
            branch = self.apply_all(layer["layers"], x, name + "/", namer)
            shortcut = self.apply_all(layer.get("projection", []), x, name + "/", namer)
            return shortcut + branch
        raise ValueError(kind)

    def dense(self, x, name, features):
        kernel = self.param(name + "/kernel", (x.shape[-1], features), "kernel")
        return x @ kernel + self.param(name + "/bias", (features,), "bias")

    def token_layer(self, layer, x, name, scope):
        kind = layer["kind"]
        if kind == "patch_embed":
            ph, pw = layer["patch"]
            kernel = self.param(name + "/kernel", (ph, pw, x.shape[1], layer["features"]), "kernel")
            y = F.conv2d(x, kernel.permute(3, 2, 0, 1), stride=(ph, pw))
            if layer.get("use_bias", True):
                y = y + self.param(name + "/bias", (layer["features"],), "bias").view(1, -1, 1, 1)
            return y.permute(0, 2, 3, 1).reshape(y.shape[0], -1, y.shape[1])
        if kind == "class_token":
            cls = self.param(scope + "cls", (1, 1, x.shape[2]), "bias")
            return torch.cat([cls.expand(x.shape[0], 1, x.shape[2]), x], dim=1)
        if kind == "pos_embed":
            return x + self.param(name + "/pos_embedding", (1, x.shape[1], x.shape[2]), "bias")
        if kind == "attention":
            return self.attention(layer, x, name)
        if kind == "mlp_block":
            hidden = self.dense(x, name + "/Dense_0", layer["hidden"])
            hidden = F.gelu(hidden, approximate="tanh" if layer["approximate"] else "none")
            return self.dense(hidden, name + "/Dense_1", x.shape[-1])
        if kind == "mean_tokens":
            return x.mean(dim=1)
        if kind == "take_class_token":
            return x[:, 0]
        raise ValueError(kind)

    def attention(self, layer, x, name):
        batch, tokens, width = x.shape
        heads = layer["heads"]
        head_dim = width // heads
        kernels, biases = [], []
        for projection in ("query", "key", "value"):
            kernel = self.param("%s/%s/kernel" % (name, projection), (width, heads, head_dim),
                                "kernel")
            bias = self.param("%s/%s/bias" % (name, projection), (heads, head_dim), "bias")
            kernels.append(kernel.reshape(width, width).t())
            biases.append(bias.reshape(width))
        out_kernel = self.param(name + "/out/kernel", (heads, head_dim, width), "kernel")
        out_bias = self.param(name + "/out/bias", (width,), "bias")
        sequence_first = x.transpose(0, 1)
        y, _ = F.multi_head_attention_forward(
            sequence_first, sequence_first, sequence_first, width, heads,
            torch.cat(kernels), torch.cat(biases), None, None, False, 0.0,
            out_kernel.reshape(width, width).t(), out_bias, training=True, need_weights=False)
        return y.transpose(0, 1)

    def batch_norm(self, layer, x, name):
        channels = x.shape[1]
        scale = self.param(name + "/scale", (channels,), "scale")
        bias = self.param(name + "/bias", (channels,), "bias")
        mean = self.stats.setdefault(name + "/mean", torch.zeros(channels))
        var = self.stats.setdefault(name + "/var", torch.ones(channels))
        if not self.train:
            return F.batch_norm(x, mean, var, scale, bias, training=False, eps=layer["epsilon"])
        m = layer["momentum"]
        torch_mean, torch_var = mean.clone(), var.clone()
        y = F.batch_norm(x, torch_mean, torch_var, scale, bias, training=True, momentum=1 - m,
                         eps=layer["epsilon"])
        x_data = x.detach()
        batch_mean = x_data.mean(dim=(0, 2, 3))
        batch_var = x_data.var(dim=(0, 2, 3), unbiased=False)
        flax_mean = m * mean + (1 - m) * batch_mean
        flax_var = m * var + (1 - m) * batch_var
        n = x.numel() // channels
        assert torch.allclose(torch_mean, flax_mean, rtol=1e-12, atol=1e-14)
        # torch_var = m * var + (1 - m) * unbiased, and biased = unbiased * (n - 1) / n.
        assert torch.allclose(m * var + (torch_var - m * var) * (n - 1) / n, flax_var,
                              rtol=1e-12, atol=1e-14)
        self.new_stats[name + "/mean"] = flax_mean
        self.new_stats[name + "/var"] = flax_var
        return y


TOKEN_KINDS = {"patch_embed", "class_token", "pos_embed", "attention", "mlp_block", "mean_tokens",
               "take_class_token"}


def cpp_f32_values(t):
    """Float32-exact values: 9 significant digits read back as the same float32."""
    return "{" + ", ".join("%.9g" % v for v in t.flatten().tolist()) + "}"


def named_values(values, printer=cpp_values):
    lines = []
    for name in sorted(values):
        tensor = values[name]
        lines.append('      {"%s", %s, %s},' % (name, cpp_ints(tensor.shape),
                                                 printer(tensor.detach())))
    return "{\n" + "\n".join(lines) + "\n  }"


def model_case(name, seed, input_shape, batch, layers_text):
    model = Model(parse_layers(layers_text), seed)
    gen = torch.Generator().manual_seed(seed + 1000)
    x_rows = f32(torch.randn((batch, math.prod(input_shape)), generator=gen))
    y = torch.randint(0, 10, (batch,), generator=gen)
    x = x_rows.reshape([batch] + input_shape).permute(0, 3, 1, 2)
    logits = model.run(x, train=True)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    model.stats = dict(model.new_stats)
    eval_logits = model.run(x, train=False)
    grads = {n: p.grad for n, p in model.params.items()}

    print("// %d samples, seed %d" % (batch, seed))
    print("const LayerModelVector %s = {" % name)
    print("  R\"(%s)\"," % layers_text)
    print("  %s," % cpp_ints(input_shape))
    print("  %d," % batch)
    print("  %s," % cpp_f32_values(x_rows))
    print("  %s," % cpp_ints(y.tolist()))
    print("  %s," % named_values(model.params, cpp_f32_values))
    print("  %s," % cpp_values(logits.detach()))
    print("  %.17g," % loss.item())
    print("  %s," % named_values(grads))
    print("  %s," % named_values(model.stats))
    print("  %s," % cpp_values(eval_logits.detach()))
    print("};")
    print()


def main():
    print("// Generated by scripts/gen_layer_model_vectors.py with torch %s:" % torch.__version__)
    print("//   /usr/bin/python3 scripts/gen_layer_model_vectors.py > "
          "tests/engine_trainer/layer_model_vectors.h")
    print("// Do not edit by hand. float64 computations from float32-exact inputs and parameters;")
    print("// Flax's names, layouts and BatchNorm convention (the generator's docstring says how).")
    print("#pragma once")
    print()
    print("#include <cstdint>")
    print("#include <string>")
    print("#include <vector>")
    print()
    print("namespace parity::engine_trainer::testing {")
    print()
    print(STRUCTS)
    for model in MODELS:
        model_case(*model)
    print("}  // namespace parity::engine_trainer::testing")


if __name__ == "__main__":
    main()
