// The gradients, parameters and model state checks: every recorded tensor at every step both runs recorded,
// element by element against the tensor tolerance, listed worst first. Gradients also give the
// global norm ratio A/B per step, the figure pitfall P2 shows up in.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "checks.h"
#include "figures.h"
#include "parity/compare/tolerance.h"

namespace parity::compare {
namespace {

constexpr size_t kDetailedTensors = 10;

// "[3, 17]" for flat index 785 of shape (784, 256): row-major.
std::string element_index(size_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const auto extent = static_cast<size_t>(shape[d]);
    index[d] = static_cast<int64_t>(flat % extent);
    flat /= extent;
  }
  return "[" + fmt::format("{}", fmt::join(index, ", ")) + "]";
}

// Larger is worse: failing tensors first, then by relative L2 (NaN as the worst).
double badness(const TensorComparison& comparison) {
  const double rel_l2 = comparison.delta.rel_l2;
  return std::isnan(rel_l2) ? std::numeric_limits<double>::infinity() : rel_l2;
}

// Whether a comparison counts against the check: out of tolerance, with gradient signal.
bool fails(const TensorComparison& comparison) {
  return !comparison.delta.within_tolerance && comparison.delta.gradient_signal;
}

bool worse(const TensorComparison& x, const TensorComparison& y) {
  if (fails(x) != fails(y)) return fails(x);
  return badness(x) > badness(y);
}

std::string describe_failure(const TensorComparison& comparison, const Tolerance& tolerance) {
  const TensorDelta& delta = comparison.delta;
  return fmt::format(
      "step {} {} {}: {} of {} elements out of tolerance; worst at {}: A {} vs B {} (allowed "
      "|diff| {}); rel L2 {}, cosine {}, norm ratio {}",
      delta.step, delta.name, shape_to_string(comparison.shape), comparison.num_out_of_tolerance,
      comparison.num_elements, element_index(comparison.worst_index, comparison.shape),
      comparison.worst_a, comparison.worst_b,
      format_number(allowed_difference(comparison.worst_b, tolerance.rtol, tolerance.atol)),
      format_number(delta.rel_l2), format_number(delta.cosine), format_number(delta.norm_ratio));
}

std::string recorded_steps(const TensorScan& scan) {
  auto list = [](const std::vector<int64_t>& steps) {
    return steps.empty() ? std::string("none") : format_steps(steps);
  };
  return fmt::format("A recorded tensors at steps {}; B at {}", list(scan.steps_a),
                     list(scan.steps_b));
}

// The group's comparisons, each marked with whether its parameter has gradient signal.
std::vector<TensorComparison> marked(const TensorGroup& group, const GradientSignal* signal) {
  std::vector<TensorComparison> comparisons = group.compared;
  if (signal == nullptr) return comparisons;
  for (TensorComparison& comparison : comparisons) {
    comparison.delta.gradient_signal = !signal->lacks_signal(comparison.delta.name);
  }
  return comparisons;
}

Check check_tensor_group(const char* id, const char* title, const char* kind,
                         const TensorGroup& group, const TensorScan& scan,
                         const Tolerance& tolerance, const GradientSignal* signal) {
  Check check;
  check.id = id;
  check.title = title;
  if (scan.common_steps.empty() || (group.compared.empty() && group.mismatched.empty())) {
    check.status = CheckStatus::kNotRecorded;
    check.summary = fmt::format("No {} recorded by both runs at the same step ({}).", kind,
                                recorded_steps(scan));
    return check;
  }

  std::vector<TensorComparison> sorted = marked(group, signal);
  std::stable_sort(sorted.begin(), sorted.end(), worse);
  double max_abs = 0;
  double max_rel_l2 = 0;
  double min_cosine = 1;
  size_t num_failing = 0;
  size_t num_without_signal = 0;
  std::optional<int64_t> first_failing;
  auto note_failing_step = [&first_failing](int64_t step) {
    first_failing = first_failing ? std::min(*first_failing, step) : step;
  };
  for (const TensorComparison& comparison : sorted) {
    const TensorDelta& delta = comparison.delta;
    if (!delta.gradient_signal) {
      ++num_without_signal;
      continue;
    }
    // NaN figures propagate (std::max would drop them) so a NaN tensor is not hidden.
    max_abs = std::isnan(delta.max_abs) ? delta.max_abs : std::max(max_abs, delta.max_abs);
    max_rel_l2 = std::isnan(delta.rel_l2) ? delta.rel_l2 : std::max(max_rel_l2, delta.rel_l2);
    min_cosine = std::min(min_cosine, delta.cosine);
    if (!fails(comparison)) continue;
    ++num_failing;
    note_failing_step(delta.step);
    if (check.details.size() < kDetailedTensors)
      check.details.push_back(describe_failure(comparison, tolerance));
  }
  for (const TensorMismatch& mismatch : group.mismatched) {
    note_failing_step(mismatch.step);
    check.details.push_back(
        fmt::format("step {} {}: not compared, {}", mismatch.step, mismatch.name, mismatch.why));
  }
  if (num_without_signal > 0) check.details.push_back(signal->describe());
  for (const TensorComparison& comparison : sorted) check.tensors.push_back(comparison.delta);

  check.figures = {
      {"tensors_compared", static_cast<double>(sorted.size()), ""},
      {"tensors_out_of_tolerance", static_cast<double>(num_failing), ""},
      {"max_abs_error", max_abs, ""},
      {"max_rel_l2", max_rel_l2, ""},
      {"min_cosine", min_cosine, ""},
  };
  if (num_without_signal > 0) {
    check.figures.push_back(
        {"tensors_without_gradient_signal", static_cast<double>(num_without_signal), ""});
  }
  const std::string steps = format_steps(scan.common_steps);
  if (first_failing) {
    check.status = CheckStatus::kFail;
    check.first_failing_step = first_failing;
    const std::string worst =
        sorted.empty() ? ""
                       : fmt::format("; worst {} at step {} (rel L2 {}, norm ratio {})",
                                     sorted.front().delta.name, sorted.front().delta.step,
                                     format_number(sorted.front().delta.rel_l2),
                                     format_number(sorted.front().delta.norm_ratio));
    check.summary = fmt::format(
        "{} of {} {} tensors outside tolerance at steps {}, first at step "
        "{}{}.",
        num_failing + group.mismatched.size(),
        sorted.size() - num_without_signal + group.mismatched.size(), kind, steps, *first_failing,
        worst);
  } else {
    check.status = CheckStatus::kPass;
    check.summary = fmt::format(
        "All {} {} tensors within tolerance at steps {}; worst rel L2 {}, "
        "max |A - B| {}.",
        sorted.size() - num_without_signal, kind, steps, format_number(max_rel_l2),
        format_number(max_abs));
  }
  if (num_without_signal > 0) {
    check.summary += fmt::format(" {} tensors of parameters without gradient signal not judged.",
                                 num_without_signal);
  }
  return check;
}

// Whether every tensor of the group compared at the first step both recorded is in tolerance;
// nullopt when none was compared there.
std::optional<bool> first_step_matches(const TensorScan& scan, const TensorGroup& group,
                                       const GradientSignal& signal) {
  if (scan.common_steps.empty()) return std::nullopt;
  const int64_t first_step = scan.common_steps.front();
  bool any = false;
  for (const TensorComparison& comparison : group.compared) {
    if (comparison.delta.step != first_step || signal.lacks_signal(comparison.delta.name)) {
      continue;
    }
    if (!comparison.delta.within_tolerance) return false;
    any = true;
  }
  return any ? std::optional<bool>(true) : std::nullopt;
}

void note_tensor_mismatch(const Check& check, Findings& findings) {
  if (!check.first_failing_step) return;
  const int64_t step = *check.first_failing_step;
  findings.first_tensor_mismatch =
      findings.first_tensor_mismatch ? std::min(*findings.first_tensor_mismatch, step) : step;
}

}  // namespace

Check check_gradients(const TensorScan& scan, const Tolerance& tolerance,
                      const GradientSignal& signal, Findings& findings) {
  Check check = check_tensor_group("gradients", "Gradients", "gradient", scan.grads, scan,
                                   tolerance, &signal);
  note_tensor_mismatch(check, findings);
  findings.first_grads_match = first_step_matches(scan, scan.grads, signal);
  if (scan.common_steps.empty()) return check;

  const int64_t first_step = scan.common_steps.front();
  const auto first_ratio = scan.grad_global_norm_ratio.find(first_step);
  if (first_ratio != scan.grad_global_norm_ratio.end()) {
    findings.grad_norm_ratio = NormRatio{first_step, first_ratio->second, "recorded gradients"};
    check.figures.push_back({"global_norm_ratio", first_ratio->second, "x"});
  }
  std::vector<std::string> ratios;
  for (const auto& [step, ratio] : scan.grad_global_norm_ratio)
    ratios.push_back(fmt::format("step {}: {:.6f}", step, ratio));
  if (!ratios.empty()) {
    check.details.push_back("global gradient norm ratio A/B: " +
                            fmt::format("{}", fmt::join(ratios, ", ")));
  }
  return check;
}

Check check_parameters(const TensorScan& scan, const Tolerance& tolerance,
                       const GradientSignal& signal, Findings& findings) {
  Check check = check_tensor_group("parameters", "Parameters", "parameter", scan.params, scan,
                                   tolerance, &signal);
  note_tensor_mismatch(check, findings);
  findings.first_params_match = first_step_matches(scan, scan.params, signal);
  return check;
}

std::optional<Check> check_model_state(const TensorScan& scan, const Tolerance& tolerance,
                                       Findings& findings) {
  if (scan.batch_stats.compared.empty() && scan.batch_stats.mismatched.empty()) return std::nullopt;
  // BatchNorm's statistics are no parameters: every one of them is judged.
  Check check = check_tensor_group("model_state", "Model state (BatchNorm statistics)",
                                   "BatchNorm statistic", scan.batch_stats, scan, tolerance,
                                   nullptr);
  note_tensor_mismatch(check, findings);
  return check;
}

}  // namespace parity::compare
