#!/usr/bin/python3
"""Known answers for pmap_engine's sigmoid, silu and flax.linen layer functions, from PyTorch.

Run with the real PyTorch (Debian's python3-torch 1.13.1, /usr/bin/python3):
    /usr/bin/python3 scripts/gen_layer_vectors.py > tests/pmap_engine/layer_vectors.h

Every case is computed in float64 from seeded torch.randn inputs: the forward result and the
gradients of sum(out * g) for a seeded cotangent g (out.backward(g)). The expected values are
Flax's semantics; where a PyTorch default differs, the torch call is given Flax's value or the
result is converted, and the comment printed above each case says which:
  - LayerNorm: F.layer_norm with eps=1e-6 (flax.linen.LayerNorm's default; torch's is 1e-5).
    Torch computes the variance in two passes, Flax as E[x^2] - E[x]^2; in float64 on these
    inputs the two agree to about 1e-15.
  - BatchNorm: F.batch_norm(training=True, momentum=0.01): torch's momentum weights the new
    batch value, Flax's (0.99) the old running value, so torch 0.01 is Flax 0.99 and the
    running mean is Flax's. Torch keeps the unbiased batch variance in running_var; Flax keeps
    the biased one (the one both normalize with), so the expected running variance is
    0.99 * var + 0.01 * biased_var, computed here with torch ops and checked against torch's
    own running_var rescaled by n / (n - 1).
  - Attention: the torch function is F._scaled_dot_product_attention (torch 1.13, [B, H, L, D]
    layout): q, k, v are transposed from Flax's [B, L, H, D] and the output back.
  - Multi-head self-attention: nn.MultiheadAttention(batch_first=True). Its in_proj_weight
    [3E, E] (query, key, value rows) and out_proj.weight [E, E] act as x @ W.T; heads are
    consecutive blocks of Dh = E / H features. Flax's DenseGeneral kernels are therefore
    query/key/value kernel [E, H, Dh] = W.T reshaped, bias [H, Dh] = b reshaped, and out kernel
    [H, Dh, E] = W_out.T reshaped, bias [E].
Activations NHWC ([B, H, W, C]): torch's NCHW tensors are permuted before printing. Arrays are
flattened row-major.
"""
import math

import torch
import torch.nn.functional as F

# The same layout and printing helpers as the conv/pooling vectors (this folder is on sys.path
# when the script runs).
from gen_conv_pool_vectors import cpp_ints, cpp_values, nhwc

torch.set_default_dtype(torch.float64)

FLAX_BATCH_NORM_MOMENTUM = 0.99
FLAX_BATCH_NORM_EPSILON = 1e-5
FLAX_LAYER_NORM_EPSILON = 1e-6

STRUCTS = """\
// sigmoid(x) and silu(x) with the gradients of sum(out * g).
struct ActivationVector {
  std::vector<int64_t> shape;
  std::vector<double> x;
  std::vector<double> sigmoid;
  std::vector<double> silu;
  std::vector<double> g;
  std::vector<double> grad_sigmoid;
  std::vector<double> grad_silu;
};

// layer_norm over the last axis: x [..., D], scale and bias [D].
struct LayerNormVector {
  std::vector<int64_t> x_shape;
  std::vector<double> x;
  std::vector<double> scale;
  std::vector<double> bias;
  double epsilon;
  std::vector<double> out;
  std::vector<double> g;
  std::vector<double> grad_x;
  std::vector<double> grad_scale;
  std::vector<double> grad_bias;
};

// batch_norm in training (statistics of the batch) and in evaluation (the running statistics
// before the update): x [..., C], every other parameter [C].
struct BatchNormVector {
  std::vector<int64_t> x_shape;
  std::vector<double> x;
  std::vector<double> scale;
  std::vector<double> bias;
  std::vector<double> running_mean;
  std::vector<double> running_var;
  double momentum;
  double epsilon;
  std::vector<double> out;
  std::vector<double> batch_mean;
  std::vector<double> batch_var;
  std::vector<double> new_running_mean;
  std::vector<double> new_running_var;
  std::vector<double> g;
  std::vector<double> grad_x;
  std::vector<double> grad_scale;
  std::vector<double> grad_bias;
  std::vector<double> eval_out;
};

// dot_product_attention: query [B, Lq, H, D], key [B, Lk, H, D], value [B, Lk, H, Dv].
struct AttentionVector {
  std::vector<int64_t> query_shape;
  std::vector<double> query;
  std::vector<int64_t> key_shape;
  std::vector<double> key;
  std::vector<int64_t> value_shape;
  std::vector<double> value;
  std::vector<int64_t> out_shape;
  std::vector<double> out;
  std::vector<double> g;
  std::vector<double> grad_query;
  std::vector<double> grad_key;
  std::vector<double> grad_value;
};

// multi_head_self_attention: x [B, L, E], num_heads H, Dh = E / H; kernels and biases in
// Flax's layout (query/key/value kernel [E, H, Dh], bias [H, Dh]; out kernel [H, Dh, E],
// bias [E]).
struct SelfAttentionVector {
  std::vector<int64_t> x_shape;
  std::vector<double> x;
  int64_t num_heads;
  std::vector<double> query_kernel;
  std::vector<double> query_bias;
  std::vector<double> key_kernel;
  std::vector<double> key_bias;
  std::vector<double> value_kernel;
  std::vector<double> value_bias;
  std::vector<double> out_kernel;
  std::vector<double> out_bias;
  std::vector<double> out;
  std::vector<double> g;
  std::vector<double> grad_x;
};
"""


def print_fields(*fields):
    for i, field in enumerate(fields):
        print("    %s%s" % (field, "};" if i == len(fields) - 1 else ","))


def activation_case(name, seed):
    gen = torch.Generator().manual_seed(seed)
    # Large magnitudes on both sides, zero, and random values.
    fixed = torch.tensor([-30.0, -5.0, -1.0, -0.5, 0.0, 0.25, 1.0, 3.0, 20.0])
    x = torch.cat([fixed, torch.randn(3, generator=gen)]).reshape(3, 4).requires_grad_()
    g = torch.randn(x.shape, generator=gen)
    sig = torch.sigmoid(x)
    (grad_sig,) = torch.autograd.grad(sig, x, g)
    silu = F.silu(x)
    (grad_silu,) = torch.autograd.grad(silu, x, g)
    print("// torch.sigmoid(x), F.silu(x), seed %d" % seed)
    print("const ActivationVector %s = {" % name)
    print_fields(cpp_ints(x.shape), cpp_values(x.detach()), cpp_values(sig.detach()),
                 cpp_values(silu.detach()), cpp_values(g), cpp_values(grad_sig),
                 cpp_values(grad_silu))


def layer_norm_case(name, seed, shape):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=gen) * 1.5 + 0.7).requires_grad_()
    features = shape[-1]
    scale = torch.randn(features, generator=gen).requires_grad_()
    bias = torch.randn(features, generator=gen).requires_grad_()
    out = F.layer_norm(x, (features,), scale, bias, eps=FLAX_LAYER_NORM_EPSILON)
    g = torch.randn(out.shape, generator=gen)
    out.backward(g)
    print("// F.layer_norm(x, (%d,), scale, bias, eps=%g), seed %d"
          % (features, FLAX_LAYER_NORM_EPSILON, seed))
    print("const LayerNormVector %s = {" % name)
    print_fields(cpp_ints(x.shape), cpp_values(x.detach()), cpp_values(scale.detach()),
                 cpp_values(bias.detach()), "%.17g" % FLAX_LAYER_NORM_EPSILON,
                 cpp_values(out.detach()), cpp_values(g), cpp_values(x.grad),
                 cpp_values(scale.grad), cpp_values(bias.grad))


def batch_norm_case(name, seed, nchw_shape):
    gen = torch.Generator().manual_seed(seed)
    channels = nchw_shape[1]
    x = (torch.randn(nchw_shape, generator=gen) * 2.0 + 0.5).requires_grad_()
    scale = torch.randn(channels, generator=gen).requires_grad_()
    bias = torch.randn(channels, generator=gen).requires_grad_()
    running_mean = torch.randn(channels, generator=gen)
    running_var = torch.rand(channels, generator=gen) + 0.5
    torch_mean, torch_var = running_mean.clone(), running_var.clone()  # updated in place
    torch_momentum = 1.0 - FLAX_BATCH_NORM_MOMENTUM
    out = F.batch_norm(x, torch_mean, torch_var, scale, bias, training=True,
                       momentum=torch_momentum, eps=FLAX_BATCH_NORM_EPSILON)
    g = torch.randn(out.shape, generator=gen)
    out.backward(g)

    dims = [0, 2, 3]
    count = x.numel() // channels
    batch_mean = x.detach().mean(dims)
    batch_var = x.detach().var(dims, unbiased=False)
    m = FLAX_BATCH_NORM_MOMENTUM
    flax_mean = m * running_mean + (1 - m) * batch_mean
    flax_var = m * running_var + (1 - m) * batch_var
    assert torch.allclose(torch_mean, flax_mean, rtol=1e-14, atol=1e-14)
    unbiased = batch_var * count / (count - 1)
    assert torch.allclose(torch_var, m * running_var + (1 - m) * unbiased, rtol=1e-14, atol=1e-14)
    eval_out = F.batch_norm(x.detach(), running_mean, running_var, scale.detach(),
                            bias.detach(), training=False, eps=FLAX_BATCH_NORM_EPSILON)

    print("// F.batch_norm(x, rm, rv, scale, bias, training=True, momentum=%.2f, eps=%g) and"
          % (torch_momentum, FLAX_BATCH_NORM_EPSILON))
    print("// training=False; seed %d. new_running_var is Flax's (biased batch variance); torch's"
          % seed)
    print("// own running_var was checked to be the unbiased one (n = %d per channel)." % count)
    print("const BatchNormVector %s = {" % name)
    print_fields(cpp_ints(nhwc(x).shape), cpp_values(nhwc(x.detach())),
                 cpp_values(scale.detach()), cpp_values(bias.detach()),
                 cpp_values(running_mean), cpp_values(running_var),
                 "%.17g" % FLAX_BATCH_NORM_MOMENTUM, "%.17g" % FLAX_BATCH_NORM_EPSILON,
                 cpp_values(nhwc(out.detach())), cpp_values(batch_mean), cpp_values(batch_var),
                 cpp_values(flax_mean), cpp_values(flax_var), cpp_values(nhwc(g)),
                 cpp_values(nhwc(x.grad)), cpp_values(scale.grad), cpp_values(bias.grad),
                 cpp_values(nhwc(eval_out)))


def attention_case(name, seed, query_shape, key_length, value_depth):
    """query_shape: Flax's [B, Lq, H, D]."""
    gen = torch.Generator().manual_seed(seed)
    batch, _, heads, depth = query_shape
    q = torch.randn(query_shape, generator=gen).requires_grad_()
    k = torch.randn(batch, key_length, heads, depth, generator=gen).requires_grad_()
    v = torch.randn(batch, key_length, heads, value_depth, generator=gen).requires_grad_()
    out_bhld, _ = F._scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    out = out_bhld.transpose(1, 2)
    # The same as Flax writes it, with torch ops.
    weights = torch.softmax(torch.einsum("bqhd,bkhd->bhqk", q / math.sqrt(depth), k), dim=-1)
    assert torch.allclose(out, torch.einsum("bhqk,bkhd->bqhd", weights, v), rtol=1e-13)
    g = torch.randn(out.shape, generator=gen)
    out.backward(g)
    print("// F._scaled_dot_product_attention(q, k, v) on [B, H, L, D] transposes; seed %d" % seed)
    print("const AttentionVector %s = {" % name)
    print_fields(cpp_ints(q.shape), cpp_values(q.detach()), cpp_ints(k.shape),
                 cpp_values(k.detach()), cpp_ints(v.shape), cpp_values(v.detach()),
                 cpp_ints(out.shape), cpp_values(out.detach()), cpp_values(g),
                 cpp_values(q.grad), cpp_values(k.grad), cpp_values(v.grad))


def self_attention_case(name, seed, x_shape, num_heads):
    gen = torch.Generator().manual_seed(seed)
    embed = x_shape[-1]
    head_dim = embed // num_heads
    mha = torch.nn.MultiheadAttention(embed, num_heads, batch_first=True).eval()
    with torch.no_grad():
        for parameter in mha.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=gen) * 0.5)
    x = torch.randn(x_shape, generator=gen).requires_grad_()
    out, _ = mha(x, x, x, need_weights=False)
    g = torch.randn(out.shape, generator=gen)
    out.backward(g)

    w = mha.in_proj_weight.detach()
    b = mha.in_proj_bias.detach()

    def projection(i):
        rows = slice(i * embed, (i + 1) * embed)
        return (cpp_values(w[rows].T.reshape(embed, num_heads, head_dim)),
                cpp_values(b[rows].reshape(num_heads, head_dim)))

    out_kernel = mha.out_proj.weight.detach().T.reshape(num_heads, head_dim, embed)
    print("// nn.MultiheadAttention(%d, %d, batch_first=True)(x, x, x), seed %d; weights in"
          % (embed, num_heads, seed))
    print("// Flax's DenseGeneral layout (see the generator's docstring)")
    print("const SelfAttentionVector %s = {" % name)
    print_fields(cpp_ints(x.shape), cpp_values(x.detach()), str(num_heads), *projection(0),
                 *projection(1), *projection(2), cpp_values(out_kernel),
                 cpp_values(mha.out_proj.bias.detach()), cpp_values(out.detach()),
                 cpp_values(g), cpp_values(x.grad))


def main():
    print("// Generated by scripts/gen_layer_vectors.py with torch %s (Debian's python3-torch"
          % torch.__version__)
    print("// 1.13.1 reports that version):")
    print("//   /usr/bin/python3 scripts/gen_layer_vectors.py > tests/pmap_engine/layer_vectors.h")
    print("// Do not edit by hand. float64 throughout; activations NHWC; Flax's conventions (the")
    print("// generator's docstring says how each torch default was converted).")
    print("#pragma once")
    print()
    print("#include <cstdint>")
    print("#include <vector>")
    print()
    print("namespace pmap_engine::testing {")
    print()
    print(STRUCTS)
    activation_case("kActivations", 11)
    print()
    layer_norm_case("kLayerNorm", 12, (2, 3, 5))
    print()
    batch_norm_case("kBatchNorm", 13, (3, 4, 2, 3))
    print()
    attention_case("kAttention", 14, (2, 3, 2, 4), key_length=5, value_depth=3)
    print()
    self_attention_case("kSelfAttention", 15, (2, 4, 6), num_heads=2)
    print()
    print("}  // namespace pmap_engine::testing")


if __name__ == "__main__":
    main()
