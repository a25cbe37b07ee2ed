// The rules of the framework defaults (default_rules.h) that read the first layer output that
// parts (the Layer outputs check's first_diverging_layer) with its input agreeing: M3, a conv's
// padding; M4, GELU's form; M5, LayerNorm's epsilon; M14, a normalisation's variance formula
// (fast_variance_rule.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "default_rules.h"
#include "diverging_layer.h"
#include "figures.h"
#include "recorded_steps.h"
#include "tensor_scan.h"

namespace parity::compare {

// ---- M4, M5: the first layer whose outputs part --------------------------------------

namespace {

// jax.nn.gelu(approximate=True), Flax's nn.gelu default (jax/_src/nn/functions.py, gelu:
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))), and the exact form, PyTorch's nn.GELU()
// default approximate='none' (torch/nn/modules/activation.py, GELU: x Phi(x)).
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// The largest |out_i - form(x_i)|.
template <typename Form>
double deviation(const std::vector<double>& x, const std::vector<double>& out, Form form) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(out[i] - form(x[i])));
  return worst;
}

// Which form of GELU a run's outputs are, to well within the forms' own difference.
struct GeluForm {
  bool tanh = false;  // else the erf form
  double deviation = 0;

  std::string text() const {
    return fmt::format("{} (max deviation {})",
                       tanh ? "jax.nn.gelu's tanh form" : "the exact erf form",
                       format_number(deviation));
  }
};

std::optional<GeluForm> gelu_form_of(const std::vector<double>& x, const std::vector<double>& out,
                                     double forms_apart) {
  const double tanh_deviation = deviation(x, out, gelu_tanh);
  const double erf_deviation = deviation(x, out, gelu_erf);
  constexpr double kWithin = 0.1;  // of the largest difference between the forms at these inputs
  if (tanh_deviation < kWithin * forms_apart && tanh_deviation < erf_deviation) {
    return GeluForm{true, tanh_deviation};
  }
  if (erf_deviation < kWithin * forms_apart) return GeluForm{false, erf_deviation};
  return std::nullopt;
}

std::optional<Diagnosis> gelu_diagnosis(const RunPair& runs, const DivergingLayer& layer) {
  const std::optional<LayerValues> values = layer_values(runs, layer);
  if (!values || values->x.size() != values->a.size()) return std::nullopt;
  double forms_apart = 0;
  for (const double value : values->x) {
    forms_apart = std::max(forms_apart, std::abs(gelu_tanh(value) - gelu_erf(value)));
  }
  const std::optional<GeluForm> form_a = gelu_form_of(values->x, values->a, forms_apart);
  const std::optional<GeluForm> form_b = gelu_form_of(values->x, values->b, forms_apart);
  if (!form_a || !form_b || form_a->tanh == form_b->tanh) return std::nullopt;
  return Diagnosis{
      "M4", "GELU: the tanh approximation on one side, the exact form on the other",
      fmt::format("{}: A computes {}, B {}; the outputs differ by up to {}", layer_text(layer),
                  form_a->text(), form_b->text(), format_number(layer.max_abs)),
      "Use one GELU on both sides: Flax's nn.gelu (jax.nn.gelu) defaults to approximate=True, "
      "PyTorch's nn.GELU() to approximate='none'; write jax.nn.gelu(x, approximate=False) in "
      "the port, or nn.GELU(approximate='tanh') in PyTorch."};
}

// With the same scale and bias (the step's parameters; 1 and 0 at initialisation), each row of
// a LayerNorm's output is (x - mean) / sqrt(var + eps): A's row is B's times
// r = sqrt((var + eps_B) / (var + eps_A)), so eps_B - eps_A = (r^2 - 1)(var + eps_A), read as
// (r^2 - 1) var where eps_A is small against the row's variance.
std::optional<Diagnosis> epsilon_diagnosis(const RunPair& runs, const DivergingLayer& layer) {
  if (!layer.row_ratios || layer.shape.empty()) return std::nullopt;
  constexpr double kMultiple = 1e-2;  // rows of A that are multiples of B's, to this residual
  if (layer.row_ratios->max_residual > kMultiple) return std::nullopt;
  const std::optional<LayerValues> values = layer_values(runs, layer);
  const size_t width = static_cast<size_t>(layer.shape.back());
  if (!values || values->x.size() != values->a.size() || width == 0) return std::nullopt;
  const std::vector<double>& x = values->x;
  const std::vector<double>& a = values->a;
  const std::vector<double>& b = values->b;
  std::vector<double> differences;
  for (size_t row = 0; row + width <= x.size(); row += width) {
    double mean = 0, ab = 0, bb = 0;
    for (size_t i = row; i < row + width; ++i) mean += x[i];
    mean /= static_cast<double>(width);
    double var = 0;
    for (size_t i = row; i < row + width; ++i) {
      var += (x[i] - mean) * (x[i] - mean);
      ab += a[i] * b[i];
      bb += b[i] * b[i];
    }
    var /= static_cast<double>(width);
    if (bb > 0) differences.push_back((ab / bb) * (ab / bb) * var - var);
  }
  if (differences.empty()) return std::nullopt;
  return Diagnosis{
      "M5", "LayerNorm epsilon: 1e-5 on one side, 1e-6 on the other",
      fmt::format("{}: every row of A's output is B's times a factor from {:.6f} to {:.6f} (rows "
                  "multiples to {:.1e}), larger where the row's variance is smaller, as "
                  "sqrt((var + eps_B) / (var + eps_A)) is: eps_B - eps_A = {:.2e} (median over "
                  "{} rows)",
                  layer_text(layer), layer.row_ratios->min, layer.row_ratios->max,
                  layer.row_ratios->max_residual, median(differences), differences.size()),
      "Set epsilon explicitly on both sides: Flax's nn.LayerNorm defaults to epsilon=1e-6, "
      "PyTorch's nn.LayerNorm to eps=1e-5 (nn.LayerNorm(epsilon=1e-5) in the port)."};
}

// A conv's kernel and bias as a run recorded them at `step` (the parameters after that step's
// update: one update from the ones its forward used).
struct ConvParams {
  std::vector<double> kernel, bias;
  Shape kernel_shape;
};

std::optional<ConvParams> conv_params(const RunDir& run, int64_t step, const std::string& module) {
  if (!recorded(run, step)) return std::nullopt;
  const NamedTensors tensors = read_step_tensors(run.dir, step);
  const std::string file = step_tensors_path(run.dir, step).string();
  const auto kernel = tensors.find("params/" + module + "/kernel");
  if (kernel == tensors.end() || kernel->second.shape.size() != 4) return std::nullopt;
  ConvParams params{recorded_values(kernel->second, kernel->first, file), {},
                    kernel->second.shape};
  const auto bias = tensors.find("params/" + module + "/bias");
  if (bias != tensors.end()) params.bias = recorded_values(bias->second, bias->first, file);
  return params;
}

// The placement of a run's windows that reproduces its output, when one does clearly: within
// kFits of it, and every other placement at least kApart times further.
std::optional<WindowPlacement> clear_placement(const std::vector<WindowPlacement>& placements) {
  constexpr double kFits = 0.05, kApart = 4;
  if (placements.empty() || placements.front().residual > kFits) return std::nullopt;
  if (placements.size() > 1 && placements[1].residual < kApart * placements.front().residual) {
    return std::nullopt;
  }
  return placements.front();
}

// What jax.lax.padtype_to_pads gives for 'SAME' (jax/_src/lax/lax.py): the total padding the
// windows need, its odd pixel after the image.
std::array<int64_t, 2> same_padding(int64_t input, int64_t window, int64_t stride) {
  const int64_t out = (input + stride - 1) / stride;
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + window - input);
  return {total / 2, total - total / 2};
}

std::string placement_text(const WindowPlacement& placement, const Shape& x_shape,
                           const Shape& kernel_shape, const std::array<int64_t, 2>& strides,
                           double next_best) {
  const bool same =
      same_padding(x_shape[1], kernel_shape[0], strides[0]) ==
          std::array<int64_t, 2>{placement.before[0], placement.after[0]} &&
      same_padding(x_shape[2], kernel_shape[1], strides[1]) ==
          std::array<int64_t, 2>{placement.before[1], placement.after[1]};
  return fmt::format("the conv with its first window at input pixel ({}, {}): padding (({}, {}), "
                     "({}, {})){} (residual {}; the next placement {})",
                     -placement.before[0], -placement.before[1], placement.before[0],
                     placement.after[0], placement.before[1], placement.after[1],
                     same ? ", Flax's 'SAME' here" : "", format_number(placement.residual),
                     format_number(next_best));
}

// M3: a conv whose windows sit elsewhere on the same input. Each run's output is recomputed
// from the input and its own kernel under every padding that gives the output's size; the
// paddings that reproduce the two runs' outputs differ.
std::optional<Diagnosis> padding_diagnosis(const RunPair& runs, const DivergingLayer& layer) {
  if (layer.module.empty() || layer.shape.size() != 4) return std::nullopt;
  const std::optional<ConvParams> params_a = conv_params(runs.a, layer.step, layer.module);
  const std::optional<ConvParams> params_b = conv_params(runs.b, layer.step, layer.module);
  if (!params_a || !params_b || params_a->kernel_shape != params_b->kernel_shape) {
    return std::nullopt;
  }
  const std::optional<LayerValues> values = layer_values(runs, layer);
  if (!values || values->x_shape.size() != 4 || params_a->kernel_shape[2] != values->x_shape[3] ||
      params_a->kernel_shape[3] != layer.shape[3]) {
    return std::nullopt;
  }
  const auto placements = [&](const ConvParams& params, const std::vector<double>& out) {
    return conv_window_placements(values->x, values->x_shape, params.kernel, params.kernel_shape,
                                  params.bias, layer.strides, out, layer.shape);
  };
  const std::vector<WindowPlacement> all_a = placements(*params_a, values->a);
  const std::vector<WindowPlacement> all_b = placements(*params_b, values->b);
  const std::optional<WindowPlacement> a = clear_placement(all_a);
  const std::optional<WindowPlacement> b = clear_placement(all_b);
  if (!a || !b || a->before == b->before) return std::nullopt;
  const auto next_best = [](const std::vector<WindowPlacement>& all) {
    return all.size() > 1 ? all[1].residual : std::numeric_limits<double>::quiet_NaN();
  };
  const Shape& kernel_shape = params_a->kernel_shape;
  return Diagnosis{
      "M3", "Conv padding: the same output size, the windows placed elsewhere",
      fmt::format("{}; recomputed from that input and each run's {} after the step (one update "
                  "from the forward's), A's output is {}, B's {}. The padding after the image is "
                  "the least the windows read: more is never seen in the output",
                  layer_text(layer), layer.module,
                  placement_text(*a, values->x_shape, kernel_shape, layer.strides, next_best(all_a)),
                  placement_text(*b, values->x_shape, kernel_shape, layer.strides,
                                 next_best(all_b))),
      "Write the padding out on both sides: torch's Conv2d(padding=p) pads p before and after "
      "the image, Flax's nn.Conv defaults to padding='SAME', which at stride 2 on an even size "
      "pads (0, 1). In the port give nn.Conv the torch job's pairs (padding=((1, 1), (1, 1)) for "
      "padding=1); in PyTorch, F.pad(x, (0, 1, 0, 1)) before a Conv2d(padding=0) is 'SAME'."};
}

}  // namespace

std::optional<Diagnosis> diverging_layer_rule(const RunPair& runs, const Findings& findings) {
  if (!findings.first_diverging_layer) return std::nullopt;
  const DivergingLayer& layer = *findings.first_diverging_layer;
  if (!layer.inputs_agree || !layer.not_compared.empty()) return std::nullopt;
  if (layer.kind == "gelu") return gelu_diagnosis(runs, layer);
  // The variance formula first: its error, too, makes each row of a LayerNorm's output a
  // multiple of the other run's, which the epsilon rule would read as an epsilon.
  if (std::optional<Diagnosis> variance = fast_variance_diagnosis(runs, layer)) return variance;
  if (layer.kind == "layer_norm") return epsilon_diagnosis(runs, layer);
  if (layer.kind == "conv") return padding_diagnosis(runs, layer);
  return std::nullopt;
}

}  // namespace parity::compare
