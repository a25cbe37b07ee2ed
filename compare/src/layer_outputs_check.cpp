// The layer outputs check: both runs' layer outputs at the first step both recorded them
// (tensors/intermediates_NNNNNN.safetensors: replica 0's batch, dropout off;
// layer_intermediates.h), compared in forward order with the tensor tolerance. The first output
// that differs is the layer to look at (../shared/docs/migration-defaults.md, Appendix B:
// "attribute the first diverging layer"): with its inputs equal, a difference there is the layer's
// own (GELU's two forms, LayerNorm's epsilon, where a strided window sits), not one carried in from
// before.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "checks.h"
#include "figures.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/common/layer_intermediates.h"
#include "parity/compare/tolerance.h"

namespace parity::compare {
namespace {

using Structure = std::map<std::string, LayerIntermediate>;

// The layer outputs of a run's case by path.
Structure structure_of(const RunDir& run) {
  Structure out;
  for (LayerIntermediate& entry : recorded_layers(run)) {
    std::string path = entry.path;
    out.emplace(std::move(path), std::move(entry));
  }
  return out;
}

// The recorded files of one step, and the tolerance they are judged with.
struct StepOutputs {
  int64_t step = 0;
  NamedTensors a, b;
  std::string file_a, file_b;
  const Tolerance& tolerance;
};

// One recorded name (kIntermediatesInput, or a layer's path) compared, or why it was not.
struct Compared {
  std::optional<TensorComparison> comparison;
  std::string not_compared;
  bool agrees() const { return comparison && comparison->delta.within_tolerance; }
  double max_abs() const {
    return comparison ? comparison->delta.max_abs : std::numeric_limits<double>::quiet_NaN();
  }
};

std::string file_key(const std::string& name) {
  return name == kIntermediatesInput ? name : kIntermediatesGroup + name;
}

Compared compare_one(const std::string& name, const StepOutputs& outputs) {
  const std::string key = file_key(name);
  const auto a = outputs.a.find(key);
  const auto b = outputs.b.find(key);
  Compared out;
  if (a == outputs.a.end() || b == outputs.b.end()) {
    out.not_compared = a == outputs.a.end() ? "recorded by run B only" : "recorded by run A only";
    return out;
  }
  if (a->second.shape != b->second.shape) {
    out.not_compared = fmt::format("shapes differ: A {}, B {}", shape_to_string(a->second.shape),
                                   shape_to_string(b->second.shape));
    return out;
  }
  out.comparison = compare_values(recorded_values(a->second, key, outputs.file_a),
                                  recorded_values(b->second, key, outputs.file_b),
                                  outputs.tolerance.rtol, outputs.tolerance.atol);
  out.comparison->delta.step = outputs.step;
  out.comparison->delta.name = name;
  out.comparison->shape = a->second.shape;
  return out;
}

// The layer paths either file holds, in forward order (their order as strings).
std::vector<std::string> recorded_paths(const StepOutputs& outputs) {
  std::set<std::string> paths;
  for (const NamedTensors* tensors : {&outputs.a, &outputs.b}) {
    for (const auto& [key, tensor] : *tensors) {
      if (key.rfind(kIntermediatesGroup, 0) == 0) {
        paths.insert(key.substr(std::strlen(kIntermediatesGroup)));
      }
    }
  }
  return {paths.begin(), paths.end()};
}

// How the diverging layer's two outputs relate: a grid shift for an image, row ratios for a
// normalisation.
void relate_outputs(const StepOutputs& outputs, const LayerIntermediate& layer,
                    DivergingLayer& diverging) {
  const std::string key = file_key(diverging.path);
  const std::vector<double> a = recorded_values(outputs.a.at(key), key, outputs.file_a);
  const std::vector<double> b = recorded_values(outputs.b.at(key), key, outputs.file_b);
  if (diverging.shape.size() == 4) {
    diverging.shift = best_grid_shift(a, b, diverging.shape, layer.strides);
  }
  if (layer.kind == "layer_norm" || layer.kind == "batch_norm") {
    diverging.row_ratios = norm_row_ratios(a, b, diverging.shape, layer.kind == "batch_norm");
  }
}

DivergingLayer describe_divergence(const StepOutputs& outputs, const LayerIntermediate& layer,
                                   const Compared& compared,
                                   const std::map<std::string, Compared>& earlier) {
  DivergingLayer diverging;
  diverging.step = outputs.step;
  diverging.path = layer.path;
  diverging.kind = layer.kind;
  diverging.module = layer.module;
  diverging.strides = layer.strides;
  diverging.inputs = layer.inputs;
  for (const std::string& input : layer.inputs) {
    // Every input comes earlier in forward order; one neither run recorded does not agree.
    const auto read = earlier.find(input);
    const double max_abs =
        read == earlier.end() ? std::numeric_limits<double>::quiet_NaN() : read->second.max_abs();
    diverging.inputs_agree =
        diverging.inputs_agree && read != earlier.end() && read->second.agrees();
    // NaN (not compared) is kept: std::max would drop it.
    if (std::isnan(max_abs) || max_abs > diverging.input_max_abs) diverging.input_max_abs = max_abs;
  }
  diverging.not_compared = compared.not_compared;
  if (!compared.comparison) return diverging;
  diverging.shape = compared.comparison->shape;
  diverging.max_abs = compared.comparison->delta.max_abs;
  diverging.rel_l2 = compared.comparison->delta.rel_l2;
  relate_outputs(outputs, layer, diverging);
  return diverging;
}

std::string inputs_text(const DivergingLayer& diverging) {
  if (diverging.inputs_agree) {
    return fmt::format("inputs agree; max |diff| {}", format_number(diverging.max_abs));
  }
  return fmt::format("its input {} differs too, by up to {}; max |diff| {}",
                     fmt::join(diverging.inputs, " and "), format_number(diverging.input_max_abs),
                     format_number(diverging.max_abs));
}

void add_divergence(const DivergingLayer& diverging, const Compared& compared, Check& check) {
  check.status = CheckStatus::kFail;
  check.first_failing_step = diverging.step;
  if (!diverging.not_compared.empty()) {
    check.summary = fmt::format("First diverging layer: {} ({}), not compared: {}.", diverging.path,
                                diverging.kind, diverging.not_compared);
    return;
  }
  check.summary = fmt::format("First diverging layer: {} ({}), at step {}.", diverging.path,
                              inputs_text(diverging), diverging.step);
  const TensorComparison& comparison = *compared.comparison;
  check.details.push_back(fmt::format(
      "{} ({}) {}: {} of {} elements out of tolerance; max |A - B| {}, rel L2 {}; it reads {} "
      "(max |A - B| {})",
      diverging.path, diverging.kind, shape_to_string(diverging.shape),
      comparison.num_out_of_tolerance, comparison.num_elements, format_number(diverging.max_abs),
      format_number(diverging.rel_l2), fmt::join(diverging.inputs, ", "),
      format_number(diverging.input_max_abs)));
  check.figures.push_back({"max_abs_error", diverging.max_abs, ""});
  check.figures.push_back({"rel_l2", diverging.rel_l2, ""});
  check.figures.push_back({"input_max_abs_error", diverging.input_max_abs, ""});
  if (const auto& shift = diverging.shift) {
    check.details.push_back(fmt::format(
        "grid shift: A is closest to B's windows moved by ({}, {}) input pixels (relative "
        "residual {}; next best move {}, no move {})",
        shift->dy, shift->dx, format_number(shift->residual), format_number(shift->next_best),
        format_number(shift->unshifted)));
    check.figures.push_back({"grid_shift_dy", static_cast<double>(shift->dy), ""});
    check.figures.push_back({"grid_shift_dx", static_cast<double>(shift->dx), ""});
    check.figures.push_back({"grid_shift_residual", shift->residual, ""});
    check.figures.push_back({"grid_shift_next_best_residual", shift->next_best, ""});
    check.figures.push_back({"grid_shift_unshifted_residual", shift->unshifted, ""});
  }
  if (const auto& ratios = diverging.row_ratios) {
    check.details.push_back(fmt::format(
        "row ratios A/B over {} {}: {:.7g} to {:.7g}; each of A's is a multiple of B's within {}",
        ratios->rows, diverging.kind == "batch_norm" ? "channels" : "rows", ratios->min,
        ratios->max, format_number(ratios->max_residual)));
    check.figures.push_back({"row_ratio_min", ratios->min, "x"});
    check.figures.push_back({"row_ratio_max", ratios->max, "x"});
    check.figures.push_back({"row_ratio_max_residual", ratios->max_residual, ""});
  }
}

Check layer_outputs_check(CheckStatus status, std::string summary) {
  Check check;
  check.id = "layer_outputs";
  check.title = "Layer outputs";
  check.status = status;
  check.summary = std::move(summary);
  return check;
}

// The step both runs recorded layer outputs at first.
std::optional<int64_t> first_common_step(const RunPair& runs) {
  for (int64_t step : runs.a.intermediate_steps) {
    const auto& b = runs.b.intermediate_steps;
    if (std::binary_search(b.begin(), b.end(), step)) return step;
  }
  return std::nullopt;
}

}  // namespace

std::optional<CaseSpec> recorded_case(const RunDir& run) {
  if (run.info.case_toml.empty()) return std::nullopt;
  try {
    return case_from_text(run.info.case_toml, run.dir / "run.json (case.toml)");
  } catch (const InputError&) {
    return std::nullopt;
  }
}

std::vector<LayerIntermediate> recorded_layers(const RunDir& run) {
  const std::optional<CaseSpec> spec = recorded_case(run);
  if (!spec || !records_intermediates(spec->model)) return {};
  return layer_intermediates(spec->model);
}

std::optional<Check> check_layer_outputs(const RunPair& runs, const Tolerance& tolerance,
                                         Findings& findings) {
  if (runs.a.intermediate_steps.empty() && runs.b.intermediate_steps.empty()) return std::nullopt;
  const std::optional<int64_t> step = first_common_step(runs);
  if (!step) {
    const auto steps = [](const std::vector<int64_t>& list) {
      return list.empty() ? std::string("none") : format_steps(list);
    };
    return layer_outputs_check(
        CheckStatus::kNotRecorded,
        fmt::format("No layer outputs recorded by both runs at the same step (A: "
                    "{}; B: {}).",
                    steps(runs.a.intermediate_steps), steps(runs.b.intermediate_steps)));
  }
  Structure structure = structure_of(runs.b);
  structure.merge(structure_of(runs.a));  // A's layers where B's case lacks them
  if (structure.empty()) {
    return layer_outputs_check(
        CheckStatus::kNotRecorded,
        "Layer outputs recorded, but neither run's case text reads as a layers "
        "case to tell their order and inputs.");
  }
  const StepOutputs outputs{*step,
                            read_step_intermediates(runs.a.dir, *step),
                            read_step_intermediates(runs.b.dir, *step),
                            intermediates_path(runs.a.dir, *step).string(),
                            intermediates_path(runs.b.dir, *step).string(),
                            tolerance};
  Check check = layer_outputs_check(CheckStatus::kPass, "");
  std::map<std::string, Compared> compared;
  const Compared& batch =
      compared.emplace(kIntermediatesInput, compare_one(kIntermediatesInput, outputs))
          .first->second;
  if (batch.comparison) check.tensors.push_back(batch.comparison->delta);
  size_t layers = 0, out_of_tolerance = 0;
  double worst = 0;
  std::string worst_path;
  for (const std::string& path : recorded_paths(outputs)) {
    const Compared& result = compared.emplace(path, compare_one(path, outputs)).first->second;
    ++layers;
    if (result.comparison) check.tensors.push_back(result.comparison->delta);
    if (result.agrees()) {
      if (result.max_abs() > worst) {
        worst = result.max_abs();
        worst_path = path;
      }
      continue;
    }
    ++out_of_tolerance;
    if (findings.first_diverging_layer) continue;
    // A path neither case names (a run whose file and case disagree) is still reported.
    const auto layer = structure.find(path);
    const LayerIntermediate unknown{path, "unknown", {}, {}, {1, 1}, ""};
    findings.first_diverging_layer = describe_divergence(
        outputs, layer == structure.end() ? unknown : layer->second, result, compared);
    add_divergence(*findings.first_diverging_layer, result, check);
  }
  check.figures.insert(check.figures.begin(),
                       {{"layers_compared", static_cast<double>(layers), ""},
                        {"layers_out_of_tolerance", static_cast<double>(out_of_tolerance), ""}});
  if (!findings.first_diverging_layer) {
    check.summary = fmt::format(
        "All {} layer outputs agree at step {} on replica 0's batch (dropout off); worst max "
        "|A - B| {}{}.",
        layers, *step, format_number(worst), worst_path.empty() ? "" : " at " + worst_path);
    check.figures.push_back({"max_abs_error", worst, ""});
  }
  return check;
}

}  // namespace parity::compare
