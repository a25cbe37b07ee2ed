#include "parity/common/case_limits.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "parity/common/error.h"
#include "parity/common/model_layers.h"

namespace parity {
namespace {

// Fashion-MNIST as load_fashion_mnist holds it: 784 float32 features and one int64 label per
// sample, 60000 training and 10000 test samples (docs/case-schema.md, "Datasets").
constexpr double kFashionMnistSamples = 60000 + 10000;
constexpr double kFashionMnistTestSamples = 10000;
constexpr double kFashionMnistFeatures = 784;

double element_bytes(const std::string& dtype) { return dtype == "f32" ? 4 : 2; }

double values(const std::vector<int64_t>& shape) {
  double product = 1;
  for (int64_t size : shape) product *= static_cast<double>(size);
  return product;
}

// One layer's share of the estimates, per sample where it scales with the batch.
struct LayerCost {
  std::string name;  // "model.layers[0] (dense at f.toml:5:3)", "model.widths[1] ..."
  double parameters = 0;
  double kept_values = 0;    // what the forward keeps for the backward, per sample
  double forward_flops = 0;  // per sample
};

struct ModelCosts {
  double input_values = 0;  // one sample's
  double output_values = 0;
  std::vector<LayerCost> layers;
};

// A widths model: layer i a kernel (w_i, w_{i+1}) and a bias (w_{i+1}); the forward keeps each
// layer's pre-activation and its output.
ModelCosts widths_costs(const std::vector<int64_t>& widths) {
  ModelCosts costs;
  if (widths.empty()) return costs;
  costs.input_values = static_cast<double>(widths.front());
  costs.output_values = static_cast<double>(widths.back());
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const double in = static_cast<double>(widths[i]);
    const double out = static_cast<double>(widths[i + 1]);
    costs.layers.push_back(
        {"model.widths[" + std::to_string(i + 1) + "] (dense layer " + std::to_string(i) + ")",
         in * out + out, 2 * out, 2 * in * out});
  }
  return costs;
}

// One sample's forward through a layer: 2 operations per multiply-add of its products, one per
// value of the element-wise layers, pools and reductions.
double layer_flops(const LayerShape& shape) {
  const LayerSpec& layer = *shape.layer;
  const std::string& kind = layer.kind;
  const double in = values(shape.input);
  const double out = values(shape.output);
  if (kind == "dense") return 2 * in * static_cast<double>(layer.features);
  if (kind == "conv" || kind == "patch_embed") {
    return 2 * out * values(layer.kernel) * static_cast<double>(shape.input[2]);
  }
  if (kind == "attention") {
    // The query, key, value and out projections (4 T E^2), the scores and their weighted sum
    // (2 T^2 E).
    const double tokens = static_cast<double>(shape.input[0]);
    const double width = static_cast<double>(shape.input[1]);
    return 2 * (4 * tokens * width * width + 2 * tokens * tokens * width);
  }
  if (kind == "mlp_block") return 4 * in * static_cast<double>(layer.features);
  if (kind == "max_pool" || kind == "avg_pool") return out * values(layer.kernel);
  return std::max(in, out);
}

// A layers model: each layer keeps its output for the backward (an activation's input is the
// layer before's output).
ModelCosts layers_costs(const ModelSpec& model) {
  ModelCosts costs;
  const ModelShapes shapes = infer_model_shapes(model.layers, model.input);
  costs.input_values = values(model.input);
  costs.output_values = values(shapes.output);
  for (const LayerShape& shape : shapes.layers) {
    const LayerSpec& layer = *shape.layer;
    costs.layers.push_back({layer.place + " (" + layer.kind + " at " + layer.origin + ")",
                            shape.parameters, values(shape.output), layer_flops(shape)});
  }
  return costs;
}

ModelCosts model_costs(const ModelSpec& model) {
  return model.layers.empty() ? widths_costs(model.widths) : layers_costs(model);
}

int64_t depth(const std::vector<LayerSpec>& layers) {
  int64_t count = 0;
  for (const LayerSpec& layer : layers) {
    count += 1 + depth(layer.layers) + depth(layer.projection);
  }
  return count;
}

double test_samples(const DataSpec& data) {
  return data.dataset == "fashion-mnist" ? kFashionMnistTestSamples
                                         : static_cast<double>(data.synthetic_num_samples);
}

}  // namespace

int64_t case_model_depth(const ModelSpec& model) {
  if (!model.layers.empty()) return depth(model.layers);
  return model.widths.empty() ? 0 : static_cast<int64_t>(model.widths.size()) - 1;
}

// Derivation, per replica (a DDP rank and a pmap device each hold a whole copy of the model and
// its optimizer state: data parallelism replicates them), with P the model's parameters (a
// widths model's layer i a kernel (w_i, w_{i+1}) and a bias (w_{i+1}), docs/case-schema.md
// [model]; a layers model's as infer_model_shapes names them):
//   parameters  stored as f32 (master weights stay f32 for every train.dtype): 4P bytes,
//               exactly the tensors of the case's init file.
//   gradients   one f32 gradient per parameter: 4P.
//   optimizer   torch.optim / optax state: Adam and AdamW keep two f32 moments (8P), SGD with
//               momentum one buffer (4P), plain SGD none, RMSprop and Adagrad one
//               accumulator of squares (4P).
//   activations the forward keeps, for the backward, for one micro-batch of per_replica_batch
//               samples (batch s*k+m is micro-batch m of step s, each a full batch): the input,
//               and a widths model's layer its pre-activation and output (B * (w_0 + 2 * sum_{i>=1}
//               w_i) elements), a layers model's layer its output; each element of the compute
//               dtype (4 bytes for f32, 2 for bf16/f16).
// Every replica trains at once (threads, or devices of one pmap), so the producer holds
// replicas x that, plus the dataset once per process (the training and test splits), plus for
// ddp_ref the c10d Reducer's gradient buckets (every gradient is copied into a flat bucket
// before the allreduce: another 4P per rank).
// Left out: the allocators' and libraries' workspaces, the backward's transient activation
// gradients, the optimizer's temporaries. The estimate is therefore a lower bound: a case
// refused for exceeding physical memory cannot run here.
CaseMemoryEstimate estimate_case_memory(const CaseSpec& spec) {
  CaseMemoryEstimate estimate;
  const ModelCosts costs = model_costs(spec.model);
  const std::string& optimizer = spec.train.optimizer;
  const double moments = optimizer == "sgd" ? (spec.train.momentum > 0 ? 1 : 0)
                         : optimizer == "rmsprop" || optimizer == "adagrad" ? 1
                                                                             : 2;
  const double batch = static_cast<double>(spec.data.per_replica_batch);
  const double value_bytes = element_bytes(spec.train.dtype);
  double activation_values = costs.input_values;
  for (const LayerCost& layer : costs.layers) {
    estimate.parameter_count += layer.parameters;
    activation_values += layer.kept_values;
    const double layer_bytes =
        (2 + moments) * 4 * layer.parameters + batch * layer.kept_values * value_bytes;
    if (layer_bytes > estimate.largest_layer_bytes) {
      estimate.largest_layer = layer.name;
      estimate.largest_layer_bytes = layer_bytes;
    }
  }
  estimate.parameter_bytes = 4 * estimate.parameter_count;
  estimate.gradient_bytes = 4 * estimate.parameter_count;
  estimate.optimizer_bytes = moments * 4 * estimate.parameter_count;
  estimate.activation_bytes = batch * activation_values * value_bytes;
  estimate.per_replica_bytes = estimate.parameter_bytes + estimate.gradient_bytes +
                               estimate.optimizer_bytes + estimate.activation_bytes;
  estimate.replicas = spec.parallel.replicas;

  if (spec.data.dataset == "fashion-mnist") {
    estimate.dataset_bytes = kFashionMnistSamples * (kFashionMnistFeatures * 4 + 8);
  } else {
    // synthetic-linear: each split holds N inputs and N targets of float32.
    estimate.dataset_bytes = 2 * static_cast<double>(spec.data.synthetic_num_samples) *
                             (costs.input_values + costs.output_values) * 4;
  }
  const double replicas = static_cast<double>(estimate.replicas);
  estimate.pmap_engine_bytes = replicas * estimate.per_replica_bytes + estimate.dataset_bytes;
  estimate.ddp_ref_bytes = estimate.pmap_engine_bytes + replicas * estimate.gradient_bytes;
  return estimate;
}

// A step is every replica's micro-batches through the forward and the backward, which costs
// about twice the forward (the gradients with respect to the inputs and to the parameters); the
// evaluation one forward of each test sample.
CaseComputeEstimate estimate_case_compute(const CaseSpec& spec) {
  CaseComputeEstimate estimate;
  for (const LayerCost& layer : model_costs(spec.model).layers) {
    estimate.forward_flops += layer.forward_flops;
    if (layer.forward_flops > estimate.largest_layer_flops) {
      estimate.largest_layer = layer.name;
      estimate.largest_layer_flops = layer.forward_flops;
    }
  }
  const double samples_per_step = static_cast<double>(spec.parallel.replicas) *
                                  static_cast<double>(spec.data.per_replica_batch) *
                                  static_cast<double>(spec.train.grad_accum_steps);
  estimate.step_flops = 3 * estimate.forward_flops * samples_per_step;
  estimate.eval_flops = estimate.forward_flops * test_samples(spec.data);
  return estimate;
}

double CaseMemoryEstimate::required_bytes() const {
  return ddp_ref_bytes > pmap_engine_bytes ? ddp_ref_bytes : pmap_engine_bytes;
}

std::string format_byte_size(double num_bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (num_bytes >= 1024 && unit + 1 < std::size(kUnits)) {
    num_bytes /= 1024;
    ++unit;
  }
  char text[64];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%.0f bytes", num_bytes);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", num_bytes, kUnits[unit]);
  }
  return text;
}

std::string CaseMemoryEstimate::breakdown() const {
  return "pmap_engine " + format_byte_size(pmap_engine_bytes) + " = " + std::to_string(replicas) +
         " replicas x (parameters " + format_byte_size(parameter_bytes) + " + gradients " +
         format_byte_size(gradient_bytes) + " + optimizer state " +
         format_byte_size(optimizer_bytes) + " + activations " +
         format_byte_size(activation_bytes) + ") + dataset " + format_byte_size(dataset_bytes) +
         "; ddp_ref " + format_byte_size(ddp_ref_bytes) +
         ", the same plus its reducer's gradient buckets (" + format_byte_size(gradient_bytes) +
         " per replica)";
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<double>(pages) * static_cast<double>(page_size);
}

void check_case_memory(const CaseSpec& spec, double available_bytes) {
  const CaseMemoryEstimate estimate = estimate_case_memory(spec);
  if (available_bytes <= 0 || estimate.required_bytes() <= available_bytes) return;
  throw InputError(
      "case " + spec.name + " (" + spec.source_file.string() + ") needs at least " +
      format_byte_size(estimate.required_bytes()) + " of memory, more than this machine's " +
      format_byte_size(available_bytes) + ": " + estimate.breakdown() + "; the largest layer, " +
      estimate.largest_layer + ", holds " + format_byte_size(estimate.largest_layer_bytes) +
      " per replica; use fewer features, a smaller window or less padding in it, fewer replicas "
      "(parallel.replicas), fewer layers or a smaller batch (data.per_replica_batch)");
}

void check_case_compute(const CaseSpec& spec) {
  const CaseComputeEstimate estimate = estimate_case_compute(spec);
  const bool step = estimate.step_flops > kMaxCaseFlops;
  if (!step && estimate.eval_flops <= kMaxCaseFlops) return;
  throw InputError(fmt::format(
      "case {} ({}): {} needs {:.3g} floating-point operations, more than the {:.0e} parity "
      "runs (about half an hour of a 2-core machine); one sample's forward is {:.3g}, of which "
      "{} takes {:.3g}; use fewer features, a smaller window or less padding in it, {}",
      spec.name, spec.source_file.string(),
      step ? "a training step" : "the evaluation on the test split",
      step ? estimate.step_flops : estimate.eval_flops, kMaxCaseFlops, estimate.forward_flops,
      estimate.largest_layer, estimate.largest_layer_flops,
      step ? "or a smaller batch (data.per_replica_batch, parallel.replicas)" : "or fewer layers"));
}

void check_case_resources(const CaseSpec& spec) {
  check_case_memory(spec, physical_memory_bytes());
  check_case_compute(spec);
}

}  // namespace parity
