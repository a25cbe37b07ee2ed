#!/usr/bin/python3
"""Real PyTorch DDP training of cnn-fmnist (a small ResNet), logged with parity_torch_log.

The model is written as a PyTorch user writes a ResNet, with torchvision's module names
(torchvision/models/resnet.py: BasicBlock's conv1/bn1/conv2/bn2/downsample; the stem's
conv1/bn1; layer1, layer2; avgpool; fc), so its logged tensors carry the names `parity import
tensors` has to map onto the case's Flax paths:

    parity init cnn-fmnist --set parallel.replicas=2 --out init.safetensors
    /usr/bin/python3 interop/python/examples/train_cnn_ddp.py --set parallel.replicas=2 \\
        --init init.safetensors --out log
    parity import metrics log/metrics.jsonl --case cnn-fmnist --set parallel.replicas=2 \\
        --map loss=loss --map grad_norm=grad_norm --map param_norm=param_norm --map lr=lr \\
        --out torch-run
    parity import tensors log/tensors --case cnn-fmnist --set parallel.replicas=2 --out torch-run

What the case says and how it is written here (docs/model-layers.md):
  - input: each flat row of 784 reshaped to (B, 1, 28, 28), NCHW, the layout torch's Conv2d
    takes (the case's [28, 28, 1] is NHWC; with one channel both orders hold the same values);
  - convs: 3x3 "SAME" with stride 1 is padding=1; the strided block's 3x3 conv is
    padding [[1, 1], [1, 1]] in the case, padding=1 here; its 1x1 "VALID" projection is the
    downsample conv; no biases (use_bias = false);
  - BatchNorm2d(momentum = 1 - the case's momentum, eps = its epsilon): the case writes Flax's
    momentum, which weighs the old average, torch's weighs the new value; every rank normalises
    with its own batch's statistics and DDP broadcasts rank 0's running statistics before each
    forward (broadcast_buffers=True), the case's sync = false;
  - global_avg_pool is AdaptiveAvgPool2d(1) (a mean over height and width), dense is fc;
  - the initial parameters from the init file, in the case's Flax names and layouts: kernels
    HWIO -> Conv2d weight OIHW, dense (in, out) -> Linear (out, in), BatchNorm scale -> weight;
    the k-th conv (BatchNorm, dense) of the case in creation order into the k-th of the model
    in registration order. BatchNorm's running statistics start at 0 and 1 in both.
The data, order, DDP, loss, optimizer and launching are ddp_example.py's.
"""

import functools
import sys

import ddp_example
from parity_log_common import read_safetensors  # ddp_example put interop/python on the path

# Stage widths and blocks of cnn-fmnist (cases/cnn-fmnist.toml), as a user writes them down.
STEM_FEATURES = 16
STAGES = [(16, 2, 1), (32, 2, 2)]  # (features, blocks, stride of the first block)
NUM_CLASSES = 10


def batch_norm_settings(case):
    """The case's one BatchNorm (momentum, epsilon); this model uses one for all its norms."""
    found = set()

    def walk(layers):
        for layer in layers:
            if layer["kind"] == "batch_norm":
                if layer.get("sync", False):
                    sys.exit("train_cnn_ddp.py: a batch_norm with sync = true needs SyncBatchNorm")
                found.add((layer["momentum"], layer["epsilon"]))
            walk(layer.get("layers", []))
            walk(layer.get("projection", []))

    walk(case["model"]["layers"])
    if len(found) != 1:
        sys.exit(f"train_cnn_ddp.py: the case's batch_norm layers have momentum and epsilon "
                 f"{sorted(found)}; this model takes one setting for all")
    return found.pop()


def flax_module_paths(layers, scope="", counters=None):
    """The case's modules with parameters, named and ordered as flax.linen creates them
    (common/case/src/model_layers.cpp does the same): (kind, path)."""
    counters = {} if counters is None else counters
    classes = {"conv": "Conv", "batch_norm": "BatchNorm", "dense": "Dense",
               "layer_norm": "LayerNorm", "residual": "Residual", "dropout": "Dropout"}
    modules = []
    for layer in layers:
        cls = classes.get(layer["kind"])
        if cls is None:
            continue  # a function: relu, pooling, flatten
        path = f"{scope}{cls}_{counters.get(cls, 0)}"
        counters[cls] = counters.get(cls, 0) + 1
        if cls == "Residual":
            inner = {}  # the projection continues the branch's counters
            modules += flax_module_paths(layer.get("layers", []), path + "/", inner)
            modules += flax_module_paths(layer.get("projection", []), path + "/", inner)
        elif cls != "Dropout":
            modules.append((cls, path))
    return modules


def build_model(torch, case):
    nn = torch.nn
    momentum, epsilon = batch_norm_settings(case)
    norm = functools.partial(nn.BatchNorm2d, eps=epsilon, momentum=1.0 - momentum)

    class BasicBlock(nn.Module):
        def __init__(self, in_planes, planes, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn1 = norm(planes)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
            self.bn2 = norm(planes)
            self.downsample = None
            if stride != 1 or in_planes != planes:
                self.downsample = nn.Sequential(
                    nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False), norm(planes))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, STEM_FEATURES, 3, padding=1, bias=False)
            self.bn1 = norm(STEM_FEATURES)
            self.relu = nn.ReLU()
            in_planes = STEM_FEATURES
            for index, (planes, blocks, stride) in enumerate(STAGES, start=1):
                stage = []
                for block in range(blocks):
                    stage.append(BasicBlock(in_planes, planes, stride if block == 0 else 1))
                    in_planes = planes
                setattr(self, f"layer{index}", nn.Sequential(*stage))
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(in_planes, NUM_CLASSES)

        def forward(self, x):
            x = x.reshape(-1, 1, 28, 28)  # the dataset's flat rows as NCHW images
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer2(self.layer1(x))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return ResNet()


def load_init(torch, model, case, path):
    """The init file's Flax-named parameters into the model, k-th module of a kind to k-th."""
    tensors = read_safetensors(path)
    ours = {"Conv": torch.nn.Conv2d, "BatchNorm": torch.nn.BatchNorm2d, "Dense": torch.nn.Linear}
    theirs = {cls: [p for c, p in flax_module_paths(case["model"]["layers"]) if c == cls]
              for cls in ours}
    loaded = set()
    with torch.no_grad():
        for cls, module_type in ours.items():
            mine = [(n, m) for n, m in model.named_modules() if isinstance(m, module_type)]
            if len(mine) != len(theirs[cls]):
                sys.exit(f"train_cnn_ddp.py: the model has {len(mine)} {module_type.__name__} "
                         f"but the case {len(theirs[cls])} {cls} modules; write the case's model")
            for (name, module), flax_path in zip(mine, theirs[cls]):
                def take(leaf, to_torch_layout=lambda a: a):
                    key = f"{flax_path}/{leaf}"
                    if key not in tensors:
                        sys.exit(f"{path}: has no '{key}' for {name}; make it with `parity init`")
                    loaded.add(key)
                    return torch.from_numpy(to_torch_layout(tensors[key]).copy())
                if cls == "Conv":  # flax HWIO -> torch OIHW
                    module.weight.copy_(take("kernel", lambda a: a.transpose(3, 2, 0, 1)))
                elif cls == "Dense":  # flax (in, out) -> torch (out, in)
                    module.weight.copy_(take("kernel", lambda a: a.T))
                    module.bias.copy_(take("bias"))
                else:
                    module.weight.copy_(take("scale"))
                    module.bias.copy_(take("bias"))
    if loaded != set(tensors):
        sys.exit(f"{path}: holds {sorted(set(tensors) - loaded)}, which this model has no place "
                 "for; make the init file for cnn-fmnist")


def build_and_load(torch, case, init_path):
    model = build_model(torch, case)
    load_init(torch, model, case, init_path)
    return model


if __name__ == "__main__":
    ddp_example.main(__doc__.split("\n", 1)[0], "cnn-fmnist.toml", build_and_load)
