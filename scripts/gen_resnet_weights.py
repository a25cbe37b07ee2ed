#!/usr/bin/python3
"""cnn-fmnist's ResNet as real torch saves it, and the same values in Flax's names and layouts.

Run with the real PyTorch (Debian's python3-torch 1.13.1, /usr/bin/python3):
    /usr/bin/python3 scripts/gen_resnet_weights.py tests/data/weights

Writes two safetensors files for tests/interop/layer_param_names_test.cpp:
  - resnet_torch.safetensors: the state_dict of interop/python/examples/train_cnn_ddp.py's
    model (torchvision's names: conv1, bn1, layer1.0.conv1, ..., layer2.0.downsample.0/1, fc),
    torch's own seeded initialisation, after one training-mode forward pass so that BatchNorm's
    running statistics and num_batches_tracked are not their defaults;
  - resnet_flax.safetensors: the same values as Flax's variables flattened with '/'
    (flax.traverse_util.flatten_dict(sep='/')): params/... and batch_stats/..., conv kernels
    HWIO (torch OIHW transposed (2, 3, 1, 0)), Dense kernel (in, out), BatchNorm weight -> scale,
    running_mean -> mean, running_var -> var (the values as torch keeps them: this file tests
    names and layouts, not the variance convention). The torch -> Flax names are written out
    below by hand, as the oracle the mapping under test must reproduce. JAX and Flax are not
    installable here, so this file is not written by Flax itself.
"""
import os
import sys

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "interop", "python", "examples"))

import ddp_example  # noqa: E402 (needs the path above; puts interop/python on the path)
import train_cnn_ddp  # noqa: E402
from parity_log_common import write_safetensors  # noqa: E402

# torchvision names -> cnn-fmnist's Flax module paths (docs/model-layers.md's auto-names).
BLOCKS = {"layer1.0": "Residual_0", "layer1.1": "Residual_1", "layer2.0": "Residual_2",
          "layer2.1": "Residual_3"}
IN_BLOCK = {"conv1": "Conv_0", "bn1": "BatchNorm_0", "conv2": "Conv_1", "bn2": "BatchNorm_1",
            "downsample.0": "Conv_2", "downsample.1": "BatchNorm_2"}
TOP = {"conv1": "Conv_0", "bn1": "BatchNorm_0", "fc": "Dense_0"}
LEAVES = {"weight": ("params", "scale"), "bias": ("params", "bias"),
          "running_mean": ("batch_stats", "mean"), "running_var": ("batch_stats", "var")}


def flax_module(torch_module):
    for block, residual in BLOCKS.items():
        if torch_module.startswith(block + "."):
            return f"{residual}/{IN_BLOCK[torch_module[len(block) + 1:]]}"
    return TOP[torch_module]


def main():
    out_dir = sys.argv[1]
    case = ddp_example.load_case(os.path.join(REPO, "cases", "cnn-fmnist.toml"), [])
    torch.manual_seed(0)
    model = train_cnn_ddp.build_model(torch, case)
    model.train()
    model(torch.rand(4, 784))
    state = {name: value.detach().numpy() for name, value in model.state_dict().items()}
    write_safetensors(os.path.join(out_dir, "resnet_torch.safetensors"), state,
                      {"producer": "scripts/gen_resnet_weights.py",
                       "torch_version": torch.__version__})

    flax = {}
    for name, value in state.items():
        module, leaf = name.rsplit(".", 1)
        if leaf == "num_batches_tracked":
            continue  # Flax's BatchNorm keeps no counter
        path = flax_module(module)
        if leaf == "weight" and value.ndim == 4:
            flax[f"params/{path}/kernel"] = value.transpose(2, 3, 1, 0)
        elif leaf == "weight" and value.ndim == 2:
            flax[f"params/{path}/kernel"] = value.T
        else:
            collection, flax_leaf = LEAVES[leaf]
            flax[f"{collection}/{path}/{flax_leaf}"] = value
    write_safetensors(os.path.join(out_dir, "resnet_flax.safetensors"),
                      {name: np.ascontiguousarray(value) for name, value in flax.items()},
                      {"producer": "scripts/gen_resnet_weights.py"})


if __name__ == "__main__":
    main()
