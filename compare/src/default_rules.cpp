#include "default_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "figures.h"
#include "parity/common/layer_intermediates.h"
#include "rule_values.h"
#include "tensor_scan.h"

namespace parity::compare {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

double standard_deviation(const std::vector<double>& values) {
  double mean = 0;
  for (const double value : values) mean += value;
  mean /= static_cast<double>(values.size());
  double sum = 0;
  for (const double value : values) sum += (value - mean) * (value - mean);
  return std::sqrt(sum / static_cast<double>(values.size()));
}

// ---- M1: initialisers -------------------------------------------------------------------

// std x sqrt(fan_in) of a kernel drawn by each framework's default initialiser:
//  - Flax: nn.Dense and nn.Conv's default_kernel_init is lecun_normal() (flax/linen/linear.py),
//    variance_scaling(1, "fan_in", "truncated_normal") in jax/_src/nn/initializers.py, which
//    rescales the truncated normal to variance exactly 1 / fan_in: 1.
//  - PyTorch: nn.Linear and nn.Conv2d's reset_parameters call kaiming_uniform_(a=sqrt(5))
//    (torch/nn/modules/linear.py, conv.py): gain sqrt(2 / (1 + 5)), bound gain sqrt(3 / fan_in)
//    = 1 / sqrt(fan_in), a uniform of std bound / sqrt(3): 1 / sqrt(3). Their biases are
//    uniform within the same bound (rms x sqrt(fan_in) = 1 / sqrt(3)); Flax's are zeros.
constexpr double kLecunNormalScale = 1.0;
const double kTorchDefaultScale = 1 / std::sqrt(3.0);
// A run's scale within this fraction of a default's is that default.
constexpr double kSchemeTolerance = 0.15;
// Median kernel scales further apart than this factor come from different initialisations
// (one update moves a kernel's spread by a few percent at most).
constexpr double kScaleRatioLimit = 1.2;

std::string scheme_of(double scale) {
  if (std::abs(scale / kLecunNormalScale - 1) < kSchemeTolerance) {
    return " (Flax's lecun_normal gives 1)";
  }
  if (std::abs(scale / kTorchDefaultScale - 1) < kSchemeTolerance) {
    return " (PyTorch's kaiming_uniform(a=sqrt(5)) gives 1/sqrt(3) = 0.577)";
  }
  return "";
}

struct InitScales {
  double kernel = 0;  // median over the kernels of std x sqrt(fan_in)
  double bias = 0;    // median over their biases of rms x sqrt(fan_in); 0 without biases
  size_t kernels = 0;
};

// Over the dense kernels (in, out) and conv kernels HWIO: fan_in is every axis but the last.
std::optional<InitScales> init_scales(const StepValues& values) {
  std::vector<double> kernels, biases;
  for (const auto& [name, tensor] : values) {
    const size_t rank = tensor.shape.size();
    if (!starts_with(name, "params/") || !ends_with(name, "/kernel") || (rank != 2 && rank != 4)) {
      continue;
    }
    double fan_in = 1;
    for (size_t axis = 0; axis + 1 < rank; ++axis) fan_in *= static_cast<double>(tensor.shape[axis]);
    kernels.push_back(standard_deviation(tensor.values) * std::sqrt(fan_in));
    const auto bias = values.find(name.substr(0, name.size() - 6) + "bias");
    if (bias != values.end()) biases.push_back(root_mean_square(bias->second.values) * std::sqrt(fan_in));
  }
  if (kernels.empty()) return std::nullopt;
  return InitScales{median(kernels), biases.empty() ? 0.0 : median(biases), kernels.size()};
}

}  // namespace

// The parameters after the first update still carry their initialiser's spread: a step moves
// each element by about the learning rate, a few percent of a kernel's standard deviation.
std::optional<Diagnosis> initialiser_rule(const RunPair& runs, const Findings& findings) {
  const std::optional<int64_t> step = first_step_recorded(runs);
  if (!step || findings.first_loss_mismatch != step) return std::nullopt;
  const std::optional<InitScales> a = init_scales(read_values(runs.a, *step));
  const std::optional<InitScales> b = init_scales(read_values(runs.b, *step));
  if (!a || !b || a->kernels != b->kernels) return std::nullopt;
  const double ratio = a->kernel / b->kernel;
  if (ratio < kScaleRatioLimit && ratio > 1 / kScaleRatioLimit) return std::nullopt;
  return Diagnosis{
      "M1", "Different initialisers (PyTorch's vs Flax's defaults)",
      fmt::format(
          "the loss differs from step {0}; after its update the kernels' std x sqrt(fan_in), "
          "median over {5} kernels, is {1:.3f} in A{2} and {3:.3f} in B{4}, a ratio of {6:.3f}; "
          "the biases' rms x sqrt(fan_in) is {7:.3f} in A and {8:.3f} in B (PyTorch draws them "
          "uniform within 1/sqrt(fan_in), 0.577; Flax starts them at 0)",
          *step, a->kernel, scheme_of(a->kernel), b->kernel, scheme_of(b->kernel), a->kernels,
          ratio, a->bias, b->bias),
      "Start both runs from the same parameters: load one file into both (PyTorch "
      "model.load_state_dict, Flax the params passed to apply; parity init writes it). To keep "
      "PyTorch's initialisation in Flax: kernel_init=nn.initializers.variance_scaling(1/3, "
      "'fan_in', 'uniform') and a bias_init uniform within 1/sqrt(fan_in); Flax's in PyTorch: "
      "nn.init.trunc_normal_ with std 1/sqrt(fan_in) (lecun_normal) and zero biases."};
}

// ---- M2: BatchNorm momentum ---------------------------------------------------------------

namespace {

// Channels whose running mean is this small against the layer's largest are left out of the
// ratios: their batch means are rounding noise around zero.
constexpr double kNegligibleChannel = 1e-3;
// Ratios agreeing within this relative spread are one EMA weight ratio (float rounding gives
// ~1e-6); a ratio this far from 1 is a real difference.
constexpr double kRatioSpread = 1e-3;
constexpr double kRatioDistinct = 1e-2;

// Per channel of every BatchNorm layer, A's running mean next to B's at one step.
struct MeanPairs {
  std::vector<double> a, b;
  size_t layers = 0;
};

MeanPairs running_means(const StepValues& a, const StepValues& b) {
  MeanPairs pairs;
  for (const auto& [name, tensor_a] : a) {
    const auto found = b.find(name);
    if (!starts_with(name, "batch_stats/") || !ends_with(name, "/mean") || found == b.end() ||
        found->second.values.size() != tensor_a.values.size()) {
      continue;
    }
    const std::vector<double>& values_b = found->second.values;
    double largest = 0;
    for (const double value : values_b) largest = std::max(largest, std::abs(value));
    ++pairs.layers;
    for (size_t i = 0; i < values_b.size(); ++i) {
      if (std::abs(values_b[i]) > kNegligibleChannel * largest) {
        pairs.a.push_back(tensor_a.values[i]);
        pairs.b.push_back(values_b[i]);
      }
    }
  }
  return pairs;
}

// From steps s (the first) and s + 1, with r0 = alpha b0 and r1 = (1 - alpha) r0 + alpha b1 in
// both runs and the same batch means b0, b1 (the runs train alike): r1_A - q r1_B =
// r0_A (alpha_B - alpha_A) = r0_A alpha_B (1 - q), so alpha_B = (r1_A - q r1_B) / (r0_A (1 - q)).
std::optional<double> ema_weight_of_b(const MeanPairs& first, const MeanPairs& second, double q) {
  if (first.a.size() != second.a.size() || first.a.empty()) return std::nullopt;
  std::vector<double> weights;
  for (size_t i = 0; i < first.a.size(); ++i) {
    weights.push_back((second.a[i] - q * second.b[i]) / (first.a[i] * (1 - q)));
  }
  return median(weights);
}

std::string ema_weight_text(double alpha) {
  return fmt::format("{:.4f} (PyTorch momentum={:.4g}, Flax momentum={:.4g})", alpha, alpha,
                     1 - alpha);
}

}  // namespace

// Both runs start the running mean at 0, so after the first step it is alpha b0 in each: with
// the same first forward pass (the loss agrees; in train mode BatchNorm normalises by the batch's
// own statistics, so the momentum changes nothing the loss sees), the ratio of the two running
// means is the ratio of the EMA weights, the same in every channel. The gradients need not
// agree to the tolerance: BatchNorm's differ between two float32 runs by 1e-3 (cnn-fmnist.toml).
std::optional<Diagnosis> batch_norm_momentum_rule(const RunPair& runs, const Findings& findings) {
  const std::optional<int64_t> step = first_step_recorded(runs);
  if (!step || findings.first_loss_mismatch == step) return std::nullopt;
  const MeanPairs first = running_means(read_values(runs.a, *step), read_values(runs.b, *step));
  if (first.a.empty()) return std::nullopt;
  std::vector<double> ratios;
  for (size_t i = 0; i < first.a.size(); ++i) ratios.push_back(first.a[i] / first.b[i]);
  const double q = median(ratios);
  std::vector<double> deviations;
  for (const double ratio : ratios) deviations.push_back(std::abs(ratio - q));
  const double spread = median(deviations) / std::abs(q);
  if (!(spread < kRatioSpread) || std::abs(q - 1) < kRatioDistinct) return std::nullopt;

  std::string evidence = fmt::format(
      "the first forward passes agree, yet at step {} A's BatchNorm running means are {:.4f} x B's in all "
      "{} channels of {} layer(s) (median deviation {:.1e}): both started at 0 and averaged the "
      "same batch means, so A's running average weighs each new batch {:.4f} times as much as B's",
      *step, q, first.a.size(), first.layers, spread, q);
  if (recorded(runs.a, *step + 1) && recorded(runs.b, *step + 1)) {
    const MeanPairs second =
        running_means(read_values(runs.a, *step + 1), read_values(runs.b, *step + 1));
    if (const std::optional<double> alpha_b = ema_weight_of_b(first, second, q)) {
      evidence += fmt::format("; from steps {} and {}: A's weight is {}, B's {}", *step,
                              *step + 1, ema_weight_text(q * *alpha_b), ema_weight_text(*alpha_b));
    }
  }
  return Diagnosis{
      "M2", "BatchNorm momentum: the running statistics average at another rate", evidence,
      "Weigh each batch the same: PyTorch's BatchNorm2d(momentum=m) is Flax's "
      "nn.BatchNorm(momentum=1 - m). PyTorch's default m = 0.1 is Flax momentum=0.9; Flax's "
      "default 0.99 averages ten times slower (the Flax migration guides' \"0.9\" is not its "
      "default). Training loss is unaffected; evaluation with the running averages is not."};
}

// ---- M6, M7: weight decay ------------------------------------------------------------------

namespace {

// The fit needs theta_0, which no run records: theta_B + lr sign(g) undoes Adam's first step
// (m/sqrt(v) = g/|g| at step 0) for the elements both runs moved alike. Parameters this many
// learning rates from zero are read within a few percent that way; smaller ones (biases
// started at zero) are left out of the fit.
constexpr double kProxyMargin = 10;
// An element fits the decay difference when within this fraction of -lr (lambda_A - lambda_B)
// theta; the fingerprint holds when at least kFitShare of the elements fit. Decoupled decay of
// two strengths fits every element (both runs apply the same Adam step to the same gradient);
// coupled against decoupled fits most, Adam's eps turning the update of the elements whose
// gradient is near eps.
constexpr double kFitTolerance = 0.2;
constexpr double kFitShare = 0.7;
// Adam's first update moves every element by about lr; an element whose updates differ by at
// least half of that moved another way in the two runs.
constexpr double kTurnedFraction = 0.5;
// Turned elements explained by coupled decay: at least this share has |g| < lambda |theta|,
// with lambda allowed kLambdaMargin over the fit (which reads theta_0 through theta_B and runs
// ~5% low on the coupled-vs-decoupled pair: Fashion-MNIST MLP, lambda 0.01 fitted as 0.0095).
// Elsewhere few elements qualify (16% of that model's parameters).
constexpr double kCoupledShare = 0.9;
constexpr double kLambdaMargin = 1.25;

struct UpdateDifference {
  size_t elements = 0;
  size_t fitted = 0;        // elements far enough from zero to stand in for theta_0
  double lambda = 0;        // lambda_A - lambda_B: the median of -(theta_A - theta_B) / (lr theta)
  double fit_share = 0;     // of the fitted elements within kFitTolerance of the fit
  // Elements whose updates differ by at least kTurnedFraction x lr, and how many of them lie
  // where |g| < lambda |theta_B|, where decay added to g before Adam's normalisation can turn
  // it (theta_B: the run that turned moved toward zero, so the sign fix does not apply).
  size_t turned = 0;
  size_t turned_by_decay = 0;
  double difference_rms = 0;  // of A's parameters minus B's
  double parameter_rms = 0;
};

// Over every parameter recorded at the first step: d = theta_A - theta_B against theta_0.
UpdateDifference update_difference(const StepValues& a, const StepValues& b, double lr) {
  std::vector<double> d, theta, g;
  for (const auto& [name, tensor_a] : a) {
    const auto tensor_b = b.find(name);
    const auto grad = b.find("grads/" + name.substr(7));
    if (!starts_with(name, "params/") || tensor_b == b.end() || grad == b.end()) continue;
    for (size_t i = 0; i < tensor_a.values.size(); ++i) {
      d.push_back(tensor_a.values[i] - tensor_b->second.values[i]);
      theta.push_back(tensor_b->second.values[i]);
      g.push_back(grad->second.values[i]);
    }
  }
  UpdateDifference result;
  result.elements = d.size();
  result.difference_rms = root_mean_square(d);
  result.parameter_rms = root_mean_square(theta);
  std::vector<size_t> turned;
  std::vector<double> fitted_d, fitted_theta_0, slopes;
  for (size_t i = 0; i < d.size(); ++i) {
    if (std::abs(d[i]) >= kTurnedFraction * lr) {
      turned.push_back(i);
      continue;
    }
    const double theta_0 = theta[i] + lr * (g[i] > 0 ? 1 : g[i] < 0 ? -1 : 0);
    if (std::abs(theta_0) > kProxyMargin * lr) {
      fitted_d.push_back(d[i]);
      fitted_theta_0.push_back(theta_0);
      slopes.push_back(-d[i] / (lr * theta_0));
    }
  }
  if (slopes.empty()) return result;
  result.fitted = slopes.size();
  result.lambda = median(slopes);
  size_t fit = 0;
  for (size_t k = 0; k < slopes.size(); ++k) {
    const double expected = -lr * result.lambda * fitted_theta_0[k];
    if (std::abs(fitted_d[k] - expected) <= kFitTolerance * std::abs(expected)) ++fit;
  }
  result.fit_share = static_cast<double>(fit) / static_cast<double>(slopes.size());
  result.turned = turned.size();
  for (const size_t i : turned) {
    if (std::abs(g[i]) < kLambdaMargin * std::abs(result.lambda * theta[i])) {
      ++result.turned_by_decay;
    }
  }
  return result;
}

}  // namespace

std::optional<Diagnosis> weight_decay_rule(const RunPair& runs, const Findings& findings) {
  const std::optional<int64_t> step = first_step_recorded(runs);
  if (!step || findings.first_grads_match != true) return std::nullopt;
  const StepPair& first = runs.common.front();
  const double lr = first.b->lr;
  if (!(lr > 0) || std::abs(first.a->lr - lr) > 1e-6 * lr) return std::nullopt;
  const UpdateDifference found =
      update_difference(read_values(runs.a, *step), read_values(runs.b, *step), lr);
  // Rounding moves float32 parameters by ~1e-7 of their size; a decay difference far more.
  if (found.fitted == 0 || found.difference_rms < 1e-6 * found.parameter_rms ||
      found.fit_share < kFitShare ||
      found.turned_by_decay < kCoupledShare * static_cast<double>(found.turned)) {
    return std::nullopt;
  }
  const std::string fit = fmt::format(
      "{:.1f}% of the {} parameters away from zero lie within {:.0f}% of -lr (lambda_A - "
      "lambda_B) theta at lr {}",
      100 * found.fit_share, found.fitted, 100 * kFitTolerance, format_number(lr));
  if (found.turned == 0) {
    return Diagnosis{
        "M7", "Decoupled weight decay of another strength (AdamW's default lambda)",
        fmt::format("at step {} the gradients agree but the updated parameters differ by a "
                    "multiple of the parameters themselves: lambda_A - lambda_B = {:.3g} ({})",
                    *step, found.lambda, fit),
        "Set the decay explicitly on both sides: torch.optim.AdamW(weight_decay=lambda) "
        "defaults to 1e-2, optax.adamw(learning_rate, weight_decay=lambda) to 1e-4."};
  }
  return Diagnosis{
      "M6", "Adam's coupled L2 on one side, AdamW's decoupled decay on the other",
      fmt::format("at step {} the gradients agree but {} of {} parameters were moved about lr "
                  "another way (|theta_A - theta_B| >= lr/2), {} of them where |g| < lambda "
                  "|theta| with lambda = {:.3g} fitted from the rest, whose updates differ by "
                  "lr lambda theta ({}): one run added lambda theta to the gradient before Adam "
                  "normalised it, the other decayed the parameters after",
                  *step, found.turned, found.elements, found.turned_by_decay,
                  std::abs(found.lambda), fit),
      "torch.optim.Adam(weight_decay=lambda) is L2 added to the gradient: in Optax "
      "optax.chain(optax.add_decayed_weights(lambda), optax.adam(lr)). optax.adamw(lr, "
      "weight_decay=lambda) is torch.optim.AdamW(lr, weight_decay=lambda). Use the pair the "
      "original job meant."};
}

// ---- M4, M5: the first layer whose outputs part --------------------------------------

namespace {

// The diverging layer's outputs in both runs and the one input they agree on (A's), each file
// read once: a layer outputs file holds every layer's output (40 MB on cnn-fmnist).
struct LayerValues {
  std::vector<double> x, a, b;
};

std::optional<LayerValues> layer_values(const RunPair& runs, const DivergingLayer& layer) {
  if (layer.inputs.size() != 1) return std::nullopt;
  const auto values_of = [&layer](const NamedTensors& tensors, const RunDir& run,
                                  const std::string& name) -> std::vector<double> {
    const std::string key = name == kIntermediatesInput ? name : kIntermediatesGroup + name;
    const auto found = tensors.find(key);
    if (found == tensors.end()) return {};
    return recorded_values(found->second, key, intermediates_path(run.dir, layer.step).string());
  };
  const NamedTensors a = read_step_intermediates(runs.a.dir, layer.step);
  const NamedTensors b = read_step_intermediates(runs.b.dir, layer.step);
  LayerValues values{values_of(a, runs.a, layer.inputs.front()), values_of(a, runs.a, layer.path),
                     values_of(b, runs.b, layer.path)};
  if (values.x.empty() || values.x.size() != values.a.size() ||
      values.a.size() != values.b.size()) {
    return std::nullopt;
  }
  return values;
}

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

std::string layer_text(const DivergingLayer& layer) {
  return fmt::format("the first layer output that parts at step {} is {} (a {}), and what it "
                     "read agrees ({}, max |A - B| {})",
                     layer.step, layer.path, layer.kind, fmt::join(layer.inputs, ", "),
                     format_number(layer.input_max_abs));
}

std::optional<Diagnosis> gelu_diagnosis(const RunPair& runs, const DivergingLayer& layer) {
  const std::optional<LayerValues> values = layer_values(runs, layer);
  if (!values) return std::nullopt;
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
  if (!values || width == 0) return std::nullopt;
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

}  // namespace

std::optional<Diagnosis> diverging_layer_rule(const RunPair& runs, const Findings& findings) {
  if (!findings.first_diverging_layer) return std::nullopt;
  const DivergingLayer& layer = *findings.first_diverging_layer;
  if (!layer.inputs_agree || !layer.not_compared.empty()) return std::nullopt;
  if (layer.kind == "gelu") return gelu_diagnosis(runs, layer);
  if (layer.kind == "layer_norm") return epsilon_diagnosis(runs, layer);
  // A strided window padded differently (M3) needs more than the layer outputs' best grid move,
  // which is approximate at stride 2 (the layer outputs check reports it): not diagnosed yet.
  return std::nullopt;
}

const std::vector<DefaultRule>& default_rules() {
  static const std::vector<DefaultRule> rules = {initialiser_rule, diverging_layer_rule,
                                                 label_smoothing_rule, weight_decay_rule,
                                                 batch_norm_momentum_rule};
  return rules;
}

}  // namespace parity::compare
