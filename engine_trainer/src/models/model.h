// The MLP cases written with pmap_engine exactly as seed 002 writes them in JAX:
//
//   def mlp(params, x): h = tanh(x @ w1 + b1); return h @ w2 + b2
//   def loss_fn(params, x, y):
//       return mean(softmax_cross_entropy_with_integer_labels(mlp(params, x), y))
//   def train_step(params, opt_state, x, y):
//       loss, grads = value_and_grad(loss_fn)(params, x, y)
//       updates, opt_state = optimizer.update(grads, opt_state, params)
//       return optax.apply_updates(params, updates), opt_state, loss
//
// generalised to the case's layer widths, activation, loss and optimizer (the jitted step and
// the optimizer: parity/engine_trainer/case_model.h).
#pragma once

#include "parity/common/case_spec.h"
#include "parity/common/host_tensor.h"
#include "parity/engine_trainer/case_model.h"
#include "pmap_engine/transforms.h"

namespace parity::engine_trainer {

namespace pe = pmap_engine;

// One array on the host: F64 for an f64 array (the float64 oracle), else F32.
HostTensor to_host(const pe::Array& array);
// Tensors keep the leaves' precision: F64 for f64 leaves (the float64 oracle), else F32.
NamedTensors tensors_from_params(const pe::Tree& params, const std::string& separator = ".");
// Every leaf cast to `dtype`.
pe::Tree cast_tree(const pe::Tree& tree, pe::DType dtype);

// x: [B, widths[0]] -> [B, widths.back()].
pe::Array mlp_forward(const ModelSpec& model, const pe::Tree& params, const pe::Array& x);
// The case's train.dtype ("f32", "bf16", "f16") as an engine dtype.
pe::DType compute_dtype(const std::string& name);

// Mean loss over the batch; y: i32 labels [B] or float targets [B, T]. With a `dtype` other
// than the master weights' (f32, or f64 for the oracle) the forward pass runs in it from them
// (mixed precision), and the loss is cast back to the master dtype unless `cast_loss` is false
// (002 §3.4's loss_fn_mixed without its last line: the loss stays in `dtype`).
pe::Array mlp_loss(const ModelSpec& model, const pe::Tree& params, const pe::Array& x,
                   const pe::Array& y, pe::DType dtype = pe::DType::f32, bool cast_loss = true);
// The same as seed 002's loss_fn(params, x, y), the function value_and_grad takes.
pe::TreeFunction mlp_loss_fn(const ModelSpec& model, pe::DType dtype = pe::DType::f32,
                             bool cast_loss = true);

// The mean loss of a batch's model outputs: softmax cross-entropy with integer labels y [B]
// (label-smoothed as the case says: smoothed_cross_entropy.h), or the mean squared error against
// float targets y [B, T].
pe::Array outputs_loss(const ModelSpec& model, const pe::Array& outputs, const pe::Array& y);

}  // namespace parity::engine_trainer
