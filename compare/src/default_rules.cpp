#include "default_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "figures.h"
#include "recorded_steps.h"
#include "parity/common/layer_intermediates.h"
#include "tensor_scan.h"

namespace parity::compare {
namespace {

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

// ---- M12: BatchNorm under data parallelism ------------------------------------------------

namespace {

// A BatchNorm's first running mean against the mean of replica 0's batch at its input, per
// channel: r = w mu fitted over the channels, and how far r is from any multiple of mu.
struct BatchMeanFit {
  double weight = 0;    // w = <r, mu> / <mu, mu>
  double residual = 0;  // ||r - w mu|| / ||r||
};

BatchMeanFit fit_to_batch_mean(const std::vector<double>& running, const std::vector<double>& mu) {
  double rm = 0, mm = 0, rr = 0;
  for (size_t c = 0; c < mu.size(); ++c) {
    rm += running[c] * mu[c];
    mm += mu[c] * mu[c];
    rr += running[c] * running[c];
  }
  BatchMeanFit fit;
  fit.weight = mm > 0 ? rm / mm : 0;
  double dd = 0;
  for (size_t c = 0; c < mu.size(); ++c) {
    dd += (running[c] - fit.weight * mu[c]) * (running[c] - fit.weight * mu[c]);
  }
  fit.residual = rr > 0 ? std::sqrt(dd / rr) : std::numeric_limits<double>::infinity();
  return fit;
}

// The per-channel mean of replica 0's batch where the model's first BatchNorm reads it, from
// the run's layer outputs at `step`; empty when the run recorded none there.
struct FirstBatchNorm {
  std::string module, path, input;
  std::vector<double> batch_mean;
};

std::optional<FirstBatchNorm> first_batch_norm_input(const RunDir& run, int64_t step) {
  const auto& steps = run.intermediate_steps;
  if (std::find(steps.begin(), steps.end(), step) == steps.end()) return std::nullopt;
  for (const LayerIntermediate& layer : recorded_layers(run)) {
    if (layer.kind != "batch_norm" || layer.module.empty() || layer.inputs.size() != 1) continue;
    const std::string& input = layer.inputs.front();
    const std::string key = input == kIntermediatesInput ? input : kIntermediatesGroup + input;
    const NamedTensors tensors = read_step_intermediates(run.dir, step);
    const auto found = tensors.find(key);
    if (found == tensors.end() || found->second.shape.empty()) return std::nullopt;
    const std::vector<double> x =
        recorded_values(found->second, key, intermediates_path(run.dir, step).string());
    const auto channels = static_cast<size_t>(found->second.shape.back());
    if (channels == 0) return std::nullopt;
    FirstBatchNorm out{layer.module, layer.path, input, std::vector<double>(channels)};
    for (size_t i = 0; i < x.size(); ++i) out.batch_mean[i % channels] += x[i];
    for (double& mean : out.batch_mean) mean /= static_cast<double>(x.size() / channels);
    return out;
  }
  return std::nullopt;
}

std::string batch_fit_text(const BatchMeanFit& fit) {
  return fmt::format("{:.4f} x it (residual {:.1e})", fit.weight, fit.residual);
}

}  // namespace

// Both runs start the running mean at 0, so after the first step it is alpha mu, mu the mean of
// the batch the replica normalised with: its own (DDP; Flax without axis_name) or the global
// batch's (Flax's BatchNorm(axis_name=...), torch's SyncBatchNorm). Replica 0's own batch is
// known where a run recorded the BatchNorm's input (its layer outputs), so one run's running
// mean is a multiple of replica 0's batch mean in every channel and the other's is not.
std::optional<Diagnosis> batch_norm_sync_rule(const RunPair& runs, const Findings&) {
  // Tolerances: a multiple to float32 rounding, against a batch of other samples, whose
  // channel means differ from replica 0's by the sampling noise (20% on M12's 16 of 64).
  constexpr double kMultiple = 1e-4, kNotMultiple = 1e-2;
  const std::optional<int64_t> step = first_step_recorded(runs);
  if (!step) return std::nullopt;
  // A run whose BatchNorm syncs records no layer outputs; its input is then taken to be the
  // other run's (the same parameters and samples at the first step). Where both recorded it,
  // it must agree: else the runs differ before the BatchNorm (other initial parameters, M1).
  const std::optional<FirstBatchNorm> norm_a = first_batch_norm_input(runs.a, *step);
  const std::optional<FirstBatchNorm> norm_b = first_batch_norm_input(runs.b, *step);
  if (!norm_a && !norm_b) return std::nullopt;
  const std::optional<FirstBatchNorm>& norm = norm_b ? norm_b : norm_a;
  if (norm_a && norm_b) {
    const BatchMeanFit same = fit_to_batch_mean(norm_a->batch_mean, norm_b->batch_mean);
    if (norm_a->module != norm_b->module || !(same.residual < kMultiple) ||
        !(std::abs(same.weight - 1) < kMultiple)) {
      return std::nullopt;
    }
  }
  const std::string name = "batch_stats/" + norm->module + "/mean";
  const auto fit_of = [&](const RunDir& run) -> std::optional<BatchMeanFit> {
    const StepValues values = read_values(run, *step);
    const auto found = values.find(name);
    if (found == values.end() || found->second.values.size() != norm->batch_mean.size()) {
      return std::nullopt;
    }
    return fit_to_batch_mean(found->second.values, norm->batch_mean);
  };
  const std::optional<BatchMeanFit> a = fit_of(runs.a);
  const std::optional<BatchMeanFit> b = fit_of(runs.b);
  if (!a || !b) return std::nullopt;
  const bool a_own = a->residual < kMultiple, b_own = b->residual < kMultiple;
  if (a_own == b_own || std::max(a->residual, b->residual) < kNotMultiple) return std::nullopt;
  return Diagnosis{
      "M12", "BatchNorm under data parallelism: one run normalised each replica's own batch",
      fmt::format("at step {} the running mean of {} (the first BatchNorm, {}) against the mean of "
                  "replica 0's batch at its input ({}, {} channels): A's is {}, B's {}. Both "
                  "started at 0, so the run whose mean is one multiple of it in every channel "
                  "({}) normalised with replica 0's own batch, as DDP's BatchNorm does; the "
                  "other's came from other samples, as a BatchNorm that averages its statistics "
                  "over the devices (the global batch) computes them",
                  *step, norm->module, norm->path, norm->input, norm->batch_mean.size(),
                  batch_fit_text(*a), batch_fit_text(*b), a_own ? "A" : "B"),
      "Normalise over the same samples on both sides: DDP's BatchNorm uses each replica's own "
      "batch (and rank 0's running statistics); in the Flax port leave nn.BatchNorm's axis_name "
      "unset and keep device 0's batch_stats. To train the port's global statistics in "
      "PyTorch, convert the model with torch.nn.SyncBatchNorm.convert_sync_batchnorm (CUDA "
      "only in PyTorch 1.13)."};
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
  Shape x_shape;
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
                     values_of(b, runs.b, layer.path), {}};
  if (values.x.empty() || values.a.empty() || values.a.size() != values.b.size()) {
    return std::nullopt;
  }
  const std::string& input = layer.inputs.front();
  values.x_shape = a.at(input == kIntermediatesInput ? input : kIntermediatesGroup + input).shape;
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
  if (layer.kind == "layer_norm") return epsilon_diagnosis(runs, layer);
  if (layer.kind == "conv") return padding_diagnosis(runs, layer);
  return std::nullopt;
}

const std::vector<DefaultRule>& default_rules() {
  static const std::vector<DefaultRule> rules = {
      initialiser_rule,         diverging_layer_rule,  label_smoothing_rule,
      batch_norm_sync_rule,     weight_decay_rule,     clip_placement_rule,
      batch_norm_momentum_rule, rmsprop_defaults_rule, adagrad_defaults_rule};
  return rules;
}

}  // namespace parity::compare
