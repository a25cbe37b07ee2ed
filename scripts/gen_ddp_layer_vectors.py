#!/usr/bin/python3
"""Known answers for ddp_ref's layers model (ddp_ref/src/layer_model.h), from PyTorch.

Run with the real PyTorch (Debian's python3-torch 1.13.1, /usr/bin/python3):
    /usr/bin/python3 scripts/gen_ddp_layer_vectors.py > tests/ddp_ref/layer_model_vectors.h

The case below (CASE_TOML) is a small layers model on Fashion-MNIST with every layout
conversion ddp_ref makes: a conv with SAME padding and stride 2 (asymmetric pads (0, 1)),
BatchNorm in training mode, a strided residual block with an explicit-padding conv and a 1x1
projection, silu, avg_pool SAME with count_include_pad = false, max_pool VALID with stride 2,
flatten of an image, layer_norm, gelu (tanh form) and a dense head, under softmax
cross-entropy. The batch is random rows and labels (the layers do not care). The parameters
are drawn in the canonical (Flax) layout (conv kernels HWIO, dense kernels (in, out)) as
float32 values, and the model is written here independently of ddp_ref, with
torch.nn.functional in float64 on NCHW activations:
  - convolution weights are the HWIO kernels permuted to OIHW; SAME's asymmetric pads are an
    explicit F.pad;
  - avg_pool SAME (pads (0, 1)) with count_include_pad = false is torch's own
    count_include_pad=False with symmetric padding 1, cropped to its last 7 x 7 outputs;
  - flatten goes channels-last first (Flax flattens NHWC).
Expected: the loss, every gradient in the canonical layout (the leaves are the canonical
tensors) and each BatchNorm's running statistics after the forward in Flax's convention,
computed directly from the batch's biased variance: mean = m * 0 + (1 - m) * batch_mean and
var = m * 1 + (1 - m) * biased_batch_var, m the case's momentum.
"""
import torch
import torch.nn.functional as F

CASE_TOML = """\
[case]
name = "ddp-layers-small"
description = "A small layers model for ddp_ref's tests (scripts/gen_ddp_layer_vectors.py)."

[model]
input = [28, 28, 1]
loss = "softmax_cross_entropy"
layers = [
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
]

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

BATCH = 4

# Canonical names and shapes, in the order infer_model_shapes gives them.
PARAMS = [
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


def cpp_floats(t):
    return "{" + ", ".join("%.9g" % v for v in t.flatten().tolist()) + "}"


def cpp_ints(values):
    return "{" + ", ".join(str(v) for v in values) + "}"


def main():
    gen = torch.Generator().manual_seed(20261204)
    params = {}
    for name, shape in PARAMS:
        values = torch.randn(shape, generator=gen, dtype=torch.float32) * 0.5
        if name.endswith("/scale"):
            values = 1 + values * 0.2
        params[name] = values.to(torch.float64).requires_grad_()
    rows = torch.randn((BATCH, 784), generator=gen, dtype=torch.float32).to(torch.float64)
    labels = torch.randint(0, 10, (BATCH,), generator=gen)

    stats = {}

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
    outputs = x @ params["Dense_0/kernel"] + params["Dense_0/bias"]
    loss = F.cross_entropy(outputs, labels)
    loss.backward()

    print("// Generated by scripts/gen_ddp_layer_vectors.py with PyTorch %s; do not edit."
          % torch.__version__)
    print("// Provenance and what each value is: that script's docstring.")
    print("#pragma once\n")
    print("#include <cstdint>\n#include <vector>\n")
    print("namespace parity::ddp_ref::layer_vectors {\n")
    print("struct Named {\n  const char* name;\n  std::vector<int64_t> shape;\n"
          "  std::vector<float> values;\n};\n")
    print('inline constexpr const char* kCaseToml = R"toml(%s)toml";\n' % CASE_TOML)
    print("inline constexpr int64_t kBatch = %d;" % BATCH)
    print("inline const std::vector<float> kRows = %s;" % cpp_floats(rows))
    print("inline const std::vector<int64_t> kLabels = %s;" % cpp_ints(labels.tolist()))
    print("inline const std::vector<Named> kParams = {")
    for name, shape in PARAMS:
        print('    {"%s", %s, %s},' % (name, cpp_ints(shape), cpp_floats(params[name].detach())))
    print("};")
    print("inline constexpr double kLoss = %.17g;" % loss.item())
    print("inline const std::vector<float> kOutputs = %s;" % cpp_floats(outputs.detach()))
    print("inline const std::vector<Named> kGrads = {")
    for name, shape in PARAMS:
        print('    {"%s", %s, %s},' % (name, cpp_ints(shape), cpp_floats(params[name].grad)))
    print("};")
    print("inline const std::vector<Named> kBatchStats = {")
    for name, values in stats.items():
        print('    {"%s", %s, %s},' % (name, cpp_ints(values.shape), cpp_floats(values)))
    print("};\n")
    print("}  // namespace parity::ddp_ref::layer_vectors")


if __name__ == "__main__":
    main()
