#include "models/model.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <optional>

#include "models/smoothed_cross_entropy.h"
#include "parity/common/error.h"
#include "pmap_engine/ops.h"

namespace parity::engine_trainer {
namespace {

pe::Array to_engine(const HostTensor& tensor) {
  if (tensor.dtype != DType::F32) {
    throw InputError(fmt::format("parameters must be F32, found {}", dtype_name(tensor.dtype)));
  }
  std::vector<float> values(tensor.num_elements());
  std::memcpy(values.data(), tensor.bytes.data(), tensor.num_bytes());
  return pe::Array::from_floats(pe::Shape(tensor.shape.begin(), tensor.shape.end()), values);
}

pe::Array activate(const std::string& activation, const pe::Array& x) {
  if (activation == "tanh") return pe::tanh(x);
  if (activation == "relu") return pe::relu(x);
  // torch.nn.functional.gelu's default (what ddp_ref runs) is the exact erf form, so the
  // engine uses approximate=false; jax.nn.gelu's own default is the tanh approximation.
  if (activation == "gelu") return pe::gelu(x, /*approximate=*/false);
  throw InternalError("activation '" + activation + "' passed case validation");
}

}  // namespace

std::string name_separator(const ModelSpec& model) { return model.layers.empty() ? "." : "/"; }

pe::Tree params_from_tensors(const NamedTensors& tensors, const std::string& separator) {
  // Each name's path of keys and its leaf, nested one dict level per key.
  struct Node {
    std::map<std::string, Node> children;
    std::optional<pe::Array> leaf;
    pe::Tree tree() const {
      if (leaf) return *leaf;
      std::map<std::string, pe::Tree> entries;
      for (const auto& [key, child] : children) entries.emplace(key, child.tree());
      return pe::Tree::dict(std::move(entries));
    }
  };
  Node root;
  for (const auto& [name, tensor] : tensors) {
    // A layers model may hold a parameter of its own at the top (ViT's `cls`); a widths model's
    // parameters all belong to a layer.
    if (separator == "." && name.find(separator) == std::string::npos) {
      throw InputError(fmt::format(
          "parameter '{}' is not a canonical name like dense0.kernel (a layer, a dot, a leaf)",
          name));
    }
    Node* node = &root;
    for (size_t start = 0;;) {
      const size_t end = name.find(separator, start);
      node = &node->children[name.substr(start, end - start)];
      if (end == std::string::npos) break;
      start = end + separator.size();
    }
    node->leaf = to_engine(tensor);
  }
  return root.tree();
}

HostTensor to_host(const pe::Array& array) {
  const Shape shape(array.shape().begin(), array.shape().end());
  if (array.dtype() != pe::DType::f64) return HostTensor::from_f32(shape, array.to_floats());
  HostTensor tensor = HostTensor::zeros(DType::F64, shape);
  const std::vector<double> values = array.to_doubles();
  std::memcpy(tensor.bytes.data(), values.data(), tensor.num_bytes());
  return tensor;
}

NamedTensors tensors_from_params(const pe::Tree& params, const std::string& separator) {
  NamedTensors tensors;
  std::vector<pe::Array> leaves = params.leaves();
  std::vector<std::string> paths = params.leaf_paths(separator);
  for (size_t i = 0; i < leaves.size(); ++i) tensors.emplace(paths[i], to_host(leaves[i]));
  return tensors;
}

pe::Tree cast_tree(const pe::Tree& tree, pe::DType dtype) {
  return pe::tree_map([dtype](const pe::Array& leaf) { return pe::astype(leaf, dtype); }, tree);
}

pe::Array mlp_forward(const ModelSpec& model, const pe::Tree& params, const pe::Array& x) {
  const size_t num_layers = model.widths.size() - 1;
  pe::Array h = x;
  for (size_t i = 0; i < num_layers; ++i) {
    const pe::Tree& layer = params[fmt::format("dense{}", i)];
    h = pe::matmul(h, layer["kernel"]) + layer["bias"].leaf();
    if (i + 1 < num_layers) h = activate(model.activation, h);
  }
  return h;
}

pe::DType compute_dtype(const std::string& name) {
  if (name == "f32") return pe::DType::f32;
  if (name == "bf16") return pe::DType::bf16;
  if (name == "f16") return pe::DType::f16;
  throw InternalError("dtype '" + name + "' passed case validation");
}

pe::Array mlp_loss(const ModelSpec& model, const pe::Tree& params, const pe::Array& x,
                   const pe::Array& y, pe::DType dtype, bool cast_loss) {
  // Mixed precision as seed 002 §3.4 writes it: the master weights stay f32 (they are what
  // the optimizer updates); the forward pass and the loss run in the compute dtype, and the
  // loss is cast to f32 at the end, so the gradients arrive in f32 through the casts.
  const pe::DType master = params.leaves().front().dtype();
  const bool mixed = dtype != master;
  const pe::Tree compute_params = mixed ? cast_tree(params, dtype) : params;
  pe::Array outputs = mlp_forward(model, compute_params, mixed ? pe::astype(x, dtype) : x);
  const bool float_targets = model.loss != "softmax_cross_entropy";
  pe::Array loss = outputs_loss(model, outputs, mixed && float_targets ? pe::astype(y, dtype) : y);
  return mixed && cast_loss ? pe::astype(loss, master) : loss;
}

pe::TreeFunction mlp_loss_fn(const ModelSpec& model, pe::DType dtype, bool cast_loss) {
  return [model, dtype, cast_loss](const std::vector<pe::Tree>& args) {
    return pe::Tree(mlp_loss(model, args[0], args[1].leaf(), args[2].leaf(), dtype, cast_loss));
  };
}

pe::Array outputs_loss(const ModelSpec& model, const pe::Array& outputs, const pe::Array& y) {
  return model.loss == "softmax_cross_entropy" ? pe::mean(smoothed_cross_entropy(model, outputs, y))
                                               : pe::mse(outputs, y);
}

pe::optim::GradientTransformation make_optimizer(const TrainSpec& train, bool clips) {
  namespace optim = pe::optim;
  std::vector<optim::GradientTransformation> parts;
  if (clips && train.clip_grad_norm > 0) {
    parts.push_back(optim::clip_by_global_norm(train.clip_grad_norm));
  }
  // torch.optim's SGD, Adam, RMSprop and Adagrad add weight_decay * param to the gradient (L2)
  // before anything else: optax's add_decayed_weights at the front of the chain.
  if (train.weight_decay > 0 && train.optimizer != "adamw") {
    parts.push_back(optim::add_decayed_weights(train.weight_decay));
  }
  if (train.optimizer == "sgd") {
    parts.push_back(optim::sgd(train.lr, train.momentum, train.nesterov));
  } else if (train.optimizer == "adam") {
    parts.push_back(optim::adam(train.lr, train.beta1, train.beta2, train.eps, train.eps_root));
  } else if (train.optimizer == "adamw") {
    parts.push_back(optim::adamw(train.lr, train.beta1, train.beta2, train.eps, train.eps_root,
                                 train.weight_decay));
  } else if (train.optimizer == "rmsprop") {
    // optax.rmsprop's initial_scale stays 0: torch's square_avg starts at zeros too.
    parts.push_back(
        optim::rmsprop(train.lr, train.rms_decay, train.eps, 0.0, train.eps_in_sqrt));
  } else if (train.optimizer == "adagrad") {
    parts.push_back(optim::adagrad(train.lr, train.initial_accumulator_value, train.eps,
                                   train.eps_in_sqrt));
  } else {
    throw InternalError("optimizer '" + train.optimizer + "' passed case validation");
  }
  return parts.size() == 1 ? parts.front() : optim::chain(parts);
}

pe::Jitted make_train_step(const CaseSpec& spec) {
  const ModelSpec model = spec.model;
  const pe::optim::GradientTransformation optimizer = make_optimizer(spec.train);
  const pe::DType dtype = compute_dtype(spec.train.dtype);
  pe::TreeFunction loss_fn = [model, dtype](const std::vector<pe::Tree>& args) {
    return pe::Tree(mlp_loss(model, args[0], args[1].leaf(), args[2].leaf(), dtype));
  };
  pe::TreeFunction value_and_grad = pe::value_and_grad(loss_fn);
  pe::TreeFunction train_step = [optimizer, value_and_grad](const std::vector<pe::Tree>& args) {
    const pe::Tree& params = args[0];
    const pe::Tree& opt_state = args[1];
    pe::Tree loss_and_grads = value_and_grad({params, args[2], args[3]});
    const pe::Tree& grads = loss_and_grads[1];
    auto [updates, new_state] = optimizer.update(grads, opt_state, params);
    return pe::Tree::tuple(
        {pe::optim::apply_updates(params, updates), new_state, loss_and_grads[0], grads});
  };
  pe::JitOptions options;
  options.donate_argnums = {0, 1};
  return pe::jit(train_step, options, "train_step");
}

}  // namespace parity::engine_trainer
