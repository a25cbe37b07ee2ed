#!/usr/bin/python3
"""Real PyTorch DDP training of a parity MLP case, logged with parity_torch_log.

Trains what `parity ddp CASE` (ddp_ref) trains, but with PyTorch itself: torch.distributed over
gloo, one process per replica, torch.utils.data.DistributedSampler and DataLoader,
torch.nn.parallel.DistributedDataParallel, torch.optim. Its log is then imported and compared
against ddp_ref (tests/interop/pytorch_ddp_helper_test.cpp):

    parity init mlp2-fmnist --set parallel.replicas=2 --out init.safetensors
    /usr/bin/python3 interop/python/examples/train_mlp2_ddp.py --set parallel.replicas=2 \\
        --init init.safetensors --out log
    parity import metrics log/metrics.jsonl --case mlp2-fmnist --set parallel.replicas=2 \\
        --map loss=loss --map grad_norm=grad_norm --map param_norm=param_norm --map lr=lr \\
        --out torch-run
    parity ddp mlp2-fmnist --set parallel.replicas=2 --init init.safetensors --out ddp-run
    parity compare torch-run ddp-run

The data, order, DDP, loss, optimizer and launching are ddp_example.py's (what it reproduces
of ddp_ref is written there); the model here: Linear layers of the case's widths with the
activation between them (gelu exact), the initial parameters from the init file, each canonical
kernel (in, out) transposed into the Linear's weight (out, in); DDP then broadcasts rank 0's, as
it always does.

Started by torchrun (`torchrun --nproc_per_node 2 train_mlp2_ddp.py --set parallel.replicas=2
...`) it runs as the rank torchrun gives it.
"""

import sys

import ddp_example
from parity_log_common import read_safetensors  # ddp_example put interop/python on the path


def build_model(torch, case):
    widths = case["model"]["widths"]
    activations = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU,
                   "gelu": torch.nn.GELU}  # GELU() is the exact (erf) form, like torch::gelu
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(activations[case["model"]["activation"]]())
    return torch.nn.Sequential(*layers)


def load_init(torch, model, path):
    """The init file's canonical dense{i}.kernel (in, out) / dense{i}.bias into the i-th Linear,
    kernels transposed to torch's (out, in), as ddp_ref's load_canonical_params does."""
    tensors = read_safetensors(path)
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    expected = {f"dense{i}.{k}" for i in range(len(linears)) for k in ("kernel", "bias")}
    if set(tensors) != expected:
        sys.exit(f"{path}: holds {sorted(tensors)}, the case's model needs {sorted(expected)}")
    with torch.no_grad():
        for i, linear in enumerate(linears):
            linear.weight.copy_(torch.from_numpy(tensors[f"dense{i}.kernel"].T.copy()))
            linear.bias.copy_(torch.from_numpy(tensors[f"dense{i}.bias"]))


def build_and_load(torch, case, init_path):
    model = build_model(torch, case)
    load_init(torch, model, init_path)
    return model


if __name__ == "__main__":
    ddp_example.main(__doc__.split("\n", 1)[0], "mlp2-fmnist.toml", build_and_load)
