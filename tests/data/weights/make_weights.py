# Made the weight files here with Debian 12's python3-torch 1.13.1 and python3-numpy 1.24.2:
#   /usr/bin/python3 make_weights.py
# torch_cnn.npz holds a real torch state_dict (nn.Sequential of Conv2d, BatchNorm2d, Linear,
# LayerNorm, Linear, seeded init), saved with np.savez under torch's own names and layouts.
# flax_cnn.npz holds the same values in Flax's names and layouts, moved there with numpy as
# flax/linen documents them (Conv kernel (H, W, in, out), Dense kernel (in, out), BatchNorm
# scale/bias in "params" and mean/var in "batch_stats", LayerNorm scale/bias) and flattened
# with '/' as flax.traverse_util.flatten_dict(sep='/') does. JAX and Flax are not installable
# here, so this file is not written by Flax itself.
# torch_wider.npz is a different model (a wider hidden layer and one more Linear): it must not
# map onto the other two.
import numpy as np
import torch

torch.manual_seed(0)
cnn = torch.nn.Sequential(
    torch.nn.Conv2d(3, 4, kernel_size=(3, 2)),
    torch.nn.BatchNorm2d(4),
    torch.nn.Flatten(),
    torch.nn.Linear(4 * 2 * 3, 8),
    torch.nn.LayerNorm(8),
    torch.nn.Linear(8, 2),
)
# One training-mode forward pass so that BatchNorm's running statistics are not their defaults.
cnn(torch.randn(5, 3, 4, 4))
state = {name: value.detach().numpy() for name, value in cnn.state_dict().items()}
np.savez('torch_cnn.npz', **state)

flax = {
    'params/Conv_0/kernel': state['0.weight'].transpose(2, 3, 1, 0),
    'params/Conv_0/bias': state['0.bias'],
    'params/BatchNorm_0/scale': state['1.weight'],
    'params/BatchNorm_0/bias': state['1.bias'],
    'batch_stats/BatchNorm_0/mean': state['1.running_mean'],
    'batch_stats/BatchNorm_0/var': state['1.running_var'],
    'params/Dense_0/kernel': state['3.weight'].T,
    'params/Dense_0/bias': state['3.bias'],
    'params/LayerNorm_0/scale': state['4.weight'],
    'params/LayerNorm_0/bias': state['4.bias'],
    'params/Dense_1/kernel': state['5.weight'].T,
    'params/Dense_1/bias': state['5.bias'],
}
np.savez('flax_cnn.npz', **{name: np.ascontiguousarray(value) for name, value in flax.items()})

wider = torch.nn.Sequential(
    torch.nn.Conv2d(3, 4, kernel_size=(3, 2)),
    torch.nn.BatchNorm2d(4),
    torch.nn.Flatten(),
    torch.nn.Linear(4 * 2 * 3, 16),
    torch.nn.LayerNorm(16),
    torch.nn.Linear(16, 2),
    torch.nn.Linear(2, 2),
)
np.savez('torch_wider.npz', **{n: v.detach().numpy() for n, v in wider.state_dict().items()})
