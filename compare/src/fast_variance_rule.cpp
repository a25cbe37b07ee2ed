// M14: the first layer output that parts is a batch_norm or layer_norm whose input agrees, and
// whose input's mean is large against its spread, where Flax's default one-pass variance loses
// the digits PyTorch's two-pass form keeps.
//
// Derivation. flax/linen/normalization.py _compute_stats with use_fast_variance=True (the
// default of nn.BatchNorm and nn.LayerNorm) computes var = E[x^2] - E[x]^2 in float32;
// torch's batch_norm and layer_norm compute E[(x - E[x])^2]. E[x^2] is about m^2 + s^2 for a
// group (a BatchNorm channel, a LayerNorm row) of mean m and standard deviation s, and each
// rounding of it errs by up to u (m^2 + s^2), u = 2^-24, float32's unit roundoff; the
// subtraction keeps that error, so the one-pass variance errs relatively by about
// u (m/s)^2, and the output (x - m) / sqrt(var + eps) by half that. A mean over n elements
// rounds up to n times, so the observed error is at most about (n + 1) times the one-rounding
// figure. The two-pass form errs only through the mean, by about u |m| / s, which both forms
// share: the one-pass error exceeds it by the factor |m| / s. The rule fires where that factor
// is at least kLargeMean, the one-pass error at least kDominates times what the inputs'
// disagreement (max |A - B| / s) explains, and the outputs part by no more than the one-pass
// error allows (or the one-pass variance is lost altogether, u (m/s)^2 >= 1, where float32
// clips it at zero).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "diverging_layer.h"
#include "figures.h"

namespace parity::compare {
namespace {

constexpr double kUnitRoundoff = 0x1p-24;  // float32
constexpr double kLargeMean = 10;
constexpr double kDominates = 10;

// One normalisation group's input statistics and how far the outputs part in it.
struct Group {
  double n = 0;
  double x_mean = 0, x_std = 0;
  double b_std = 0;     // the spread of B's output, which scales the divergence
  double max_diff = 0;  // max |A - B| of the outputs

  double mean_to_std() const { return std::abs(x_mean) / x_std; }
  double parting() const { return max_diff / b_std; }  // relative to the output's spread
};

// The groups a layer normalises over: a BatchNorm's channels (the last axis, every other axis
// reduced), a LayerNorm's rows (the last axis reduced). Means and deviations in two passes, in
// double.
std::vector<Group> groups_of(const LayerValues& values, bool per_channel, size_t width) {
  const size_t size = values.x.size();
  const size_t count = per_channel ? width : size / width;
  const auto group_of = [&](size_t i) { return per_channel ? i % width : i / width; };
  std::vector<Group> groups(count);
  std::vector<double> b_mean(count, 0);
  for (size_t i = 0; i < size; ++i) {
    Group& group = groups[group_of(i)];
    group.n += 1;
    group.x_mean += values.x[i];
    b_mean[group_of(i)] += values.b[i];
    group.max_diff = std::max(group.max_diff, std::abs(values.a[i] - values.b[i]));
  }
  for (size_t g = 0; g < count; ++g) {
    groups[g].x_mean /= groups[g].n;
    b_mean[g] /= groups[g].n;
  }
  for (size_t i = 0; i < size; ++i) {
    const size_t g = group_of(i);
    groups[g].x_std += (values.x[i] - groups[g].x_mean) * (values.x[i] - groups[g].x_mean);
    groups[g].b_std += (values.b[i] - b_mean[g]) * (values.b[i] - b_mean[g]);
  }
  for (Group& group : groups) {
    group.x_std = std::sqrt(group.x_std / group.n);
    group.b_std = std::sqrt(group.b_std / group.n);
  }
  return groups;
}

// Whether either run's case asks for the one-pass variance at the layer: where both ask for two
// passes (a port that already sets use_fast_variance=False) the one-pass error cannot be the
// cause, however large the input's mean (the two-pass forms part too where |mean| / std is in the
// thousands: the mean's own rounding, u |mean| / std, differs between them).
bool either_run_asks_for_one_pass(const RunPair& runs, const std::string& path) {
  for (const RunDir* run : {&runs.a, &runs.b}) {
    for (const LayerIntermediate& layer : recorded_layers(*run)) {
      if (layer.path == path && layer.one_pass_variance) return true;
    }
  }
  return false;
}

}  // namespace

std::optional<Diagnosis> fast_variance_diagnosis(const RunPair& runs, const DivergingLayer& layer) {
  const bool per_channel = layer.kind == "batch_norm";
  if ((!per_channel && layer.kind != "layer_norm") || layer.shape.empty()) return std::nullopt;
  if (!either_run_asks_for_one_pass(runs, layer.path)) return std::nullopt;
  const std::optional<LayerValues> values = layer_values(runs, layer);
  const auto width = static_cast<size_t>(layer.shape.back());
  if (!values || values->x.size() != values->a.size() || width == 0 ||
      values->x.size() % width != 0) {
    return std::nullopt;
  }
  const std::vector<Group> groups = groups_of(*values, per_channel, width);
  // The group where the outputs part most; a constant input or output says nothing.
  const Group* worst = nullptr;
  size_t worst_index = 0, large = 0;
  double largest_ratio = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Group& group = groups[g];
    if (group.x_std == 0 || group.b_std == 0) continue;
    if (group.mean_to_std() >= kLargeMean) ++large;
    largest_ratio = std::max(largest_ratio, group.mean_to_std());
    if (worst == nullptr || group.parting() > worst->parting()) {
      worst = &group;
      worst_index = g;
    }
  }
  if (worst == nullptr) return std::nullopt;
  const double ratio = worst->mean_to_std();
  const double predicted_var = kUnitRoundoff * ratio * ratio;
  const double predicted = predicted_var / 2;
  const double from_inputs = layer.input_max_abs / worst->x_std;
  const double observed = worst->parting();
  if (ratio < kLargeMean || predicted < kDominates * from_inputs) return std::nullopt;
  if (observed > (worst->n + 1) * predicted && predicted_var < 1) return std::nullopt;
  const char* group_name = per_channel ? "channel" : "row";
  const char* module = per_channel ? "nn.BatchNorm" : "nn.LayerNorm";
  return Diagnosis{
      "M14", "Normalisation variance: Flax's one-pass E[x^2] - E[x]^2 where the mean is large",
      fmt::format("{}: in {} {}, where the outputs part most ({} of the output's spread), the "
                  "input's |mean| is {:.3g} times its std ({} of {} {}s at {:g} times or more, "
                  "up to {:.3g}); float32's one-pass variance E[x^2] - E[x]^2 errs there by "
                  "about 2^-24 (mean/std)^2 = {} of the variance, {} of the output (up to "
                  "{:g} times that over a mean of {:g}), where the inputs' own disagreement "
                  "accounts for {}",
                  layer_text(layer), group_name, worst_index, format_number(observed), ratio,
                  large, groups.size(), group_name, kLargeMean, largest_ratio,
                  format_number(predicted_var), format_number(predicted), worst->n + 1, worst->n,
                  format_number(from_inputs)),
      fmt::format("Compute the variance in two passes in the port: {}(use_fast_variance=False) "
                  "computes E[(x - E[x])^2] as torch's batch_norm and layer_norm do (Flax's "
                  "default, use_fast_variance=True, cancels where |mean| >> std); or centre the "
                  "layer's input (subtract the data's mean) on both sides.",
                  module)};
}

}  // namespace parity::compare
