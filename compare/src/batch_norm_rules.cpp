// The BatchNorm rules of the framework defaults (default_rules.h): M2, the running statistics'
// momentum, and M12, the batch the statistics came from under data parallelism. Both read the
// running means after the first step, which started at 0 in both frameworks.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "default_rules.h"
#include "figures.h"
#include "parity/common/layer_intermediates.h"
#include "recorded_steps.h"
#include "tensor_scan.h"

namespace parity::compare {

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

}  // namespace parity::compare
