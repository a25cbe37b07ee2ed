#include "default_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "figures.h"
#include "recorded_steps.h"
#include "tensor_scan.h"

namespace parity::compare {
namespace {

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

const std::vector<DefaultRule>& default_rules() {
  static const std::vector<DefaultRule> rules = {
      initialiser_rule,         diverging_layer_rule,  label_smoothing_rule,
      batch_norm_sync_rule,     weight_decay_rule,     clip_placement_rule,
      batch_norm_momentum_rule, rmsprop_defaults_rule, adagrad_defaults_rule};
  return rules;
}

}  // namespace parity::compare
