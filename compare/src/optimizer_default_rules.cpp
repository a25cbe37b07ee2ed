// M9 (RMSprop) and M10 (Adagrad): the defaults of torch.optim and optax, read from each run's
// own second update (../shared/docs/migration-defaults.md items 18 and 19).
//
// Vocabulary (one run, its first two recorded steps 0 and 1, element i):
//   g0, g1     the reduced gradients of steps 0 and 1 (grads/NAME)
//   delta      the update of step 1: params after step 1 minus params after step 0
//   lr         the run's learning rate at step 1 (metrics.jsonl)
//   den        lr |g1| / |delta|: what the optimizer divided g1 by. RMSprop and Adagrad without
//              momentum scale each gradient element by its own denominator; Adam (whose first
//              moment mixes g0 into the step) and SGD with momentum do not, and fit no model
//              below.
//   floor      c, what the denominator's square holds besides the gradients: the accumulator's
//              start and an eps inside the root.
// The two models, with eps inside the root (optax/_src/transform.py scale_by_rms with
// eps_in_sqrt, scale_by_rss: rsqrt(v + eps)) and v the state after step 1:
//   RMSprop(decay)  v = decay^2 v_start + decay (1 - decay) g0^2 + (1 - decay) g1^2
//                   den^2 = (1 - decay) g1^2 + decay (1 - decay) g0^2 + c,
//                   c = decay^2 initial_scale + eps
//   Adagrad         v = s_start + g0^2 + g1^2
//                   den^2 = g1^2 + g0^2 + c,  c = initial_accumulator_value + eps
// torch puts eps after the root (torch/optim/rmsprop.py, torch/optim/adagrad.py
// _single_tensor_adagrad: sqrt(v) + eps), which adds 2 eps sqrt(v) + eps^2 to den^2: invisible
// unless sqrt(v) is near eps, so a torch run shows a floor of zero to within the fit's
// resolution. The start and an eps inside the root add alike: the fit reads their sum only.
//
// Each model is fitted to every element whose update float32 resolves (|delta| at least
// kResolution of the parameter), by least squares on the relative residual of den^2, each
// element weighted by its rounding: float32 rounds theta to 2^-24 of itself, so den^2 is known
// to sigma = 2 * 2^-24 |theta| / |delta| (relative). A model fits when kFitShare of the elements
// lie within kFitTolerance of it and its weighted residual is far below a constant's (a
// constant den is plain SGD, lr rescaled; Adagrad from 0.1 is nearly that for small gradients,
// and only the elements whose gradient is large and precisely resolved tell the two apart).
// The first update then checks the fits: both runs began from one theta_0 with the same
// gradient g0, so theta_A - theta_B after step 0 is -lr g0 (1/den0_A - 1/den0_B), with
// den0^2 = (1 - decay) g0^2 + c (RMSprop, v starting at zero as both frameworks' defaults do)
// or g0^2 + c (Adagrad).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "default_rules.h"
#include "figures.h"
#include "recorded_steps.h"

namespace parity::compare {
namespace {

constexpr double kResolution = 1e-4;     // |delta| / |theta|: float32 rounds it to < 1e-3
constexpr double kRounding = 0x1p-24;    // float32's relative rounding
constexpr double kFitTolerance = 0.01;   // relative, on den
constexpr double kFitShare = 0.95;       // of the elements within kFitTolerance
constexpr double kOverConstant = 100;    // a fit's squared residual below the constant's by this

// One element of a run's second update.
struct Element {
  double g0 = 0, g1 = 0;
  double den_squared = 0;  // (lr |g1| / |delta|)^2
  double weight = 0;       // 1 / sigma^2, sigma den^2's relative rounding error
};

struct RunUpdates {
  double lr = 0;
  std::vector<Element> elements;
};

// den^2 as a model predicts it from (g0, g1), the floor c fitted for it.
using GradientTerms = std::function<double(const Element&)>;

struct Fit {
  double decay = 0;  // RMSprop's; 0 for Adagrad and the constant
  double floor = 0;  // c
  double squared_residual = 0;  // mean of ((model - den^2) / den^2)^2, weighted 1 / sigma^2
  double fit_share = 0;         // of the elements within kFitTolerance on den
};

std::optional<RunUpdates> run_updates(const RunDir& run, int64_t step) {
  const StepMetrics* metrics = nullptr;
  for (const StepMetrics& line : run.steps) {
    if (line.step == step + 1) metrics = &line;
  }
  if (metrics == nullptr || !(metrics->lr > 0) || !recorded(run, step + 1)) return std::nullopt;
  const StepValues first = read_values(run, step);
  const StepValues second = read_values(run, step + 1);
  RunUpdates updates{metrics->lr, {}};
  for (const auto& [name, theta_1] : first) {
    if (!starts_with(name, "params/")) continue;
    const std::string grad_name = "grads/" + name.substr(7);
    const auto theta_2 = second.find(name);
    const auto g0 = first.find(grad_name);
    const auto g1 = second.find(grad_name);
    if (theta_2 == second.end() || g0 == first.end() || g1 == second.end()) continue;
    for (size_t i = 0; i < theta_1.values.size(); ++i) {
      const double delta = theta_2->second.values[i] - theta_1.values[i];
      const double size =
          std::max(std::abs(theta_1.values[i]), std::abs(theta_2->second.values[i]));
      const double grad = g1->second.values[i];
      if (grad == 0 || std::abs(delta) <= kResolution * size) continue;
      const double den = updates.lr * std::abs(grad) / std::abs(delta);
      const double sigma = 2 * kRounding * size / std::abs(delta);
      updates.elements.push_back({g0->second.values[i], grad, den * den, 1 / (sigma * sigma)});
    }
  }
  if (updates.elements.empty()) return std::nullopt;
  return updates;
}

// The floor c minimising sum(w ((terms + c) / d - 1)^2), d = den^2: closed form, then how well
// it fits.
Fit fit_floor(const std::vector<Element>& elements, const GradientTerms& terms, double decay) {
  double numerator = 0, denominator = 0, total_weight = 0;
  for (const Element& e : elements) {
    numerator += e.weight * (1 - terms(e) / e.den_squared) / e.den_squared;
    denominator += e.weight / (e.den_squared * e.den_squared);
    total_weight += e.weight;
  }
  Fit fit{decay, numerator / denominator, 0, 0};
  size_t within = 0;
  for (const Element& e : elements) {
    const double model = terms(e) + fit.floor;
    const double residual = (model - e.den_squared) / e.den_squared;
    fit.squared_residual += e.weight * residual * residual;
    if (model > 0 && std::abs(std::sqrt(model / e.den_squared) - 1) <= kFitTolerance) ++within;
  }
  fit.squared_residual /= total_weight;
  fit.fit_share = static_cast<double>(within) / static_cast<double>(elements.size());
  return fit;
}

GradientTerms rmsprop_terms(double decay) {
  return [decay](const Element& e) {
    return (1 - decay) * (e.g1 * e.g1 + decay * e.g0 * e.g0);
  };
}

// RMSprop's decay: 1 - decay on a log grid from 1 to 1e-4, then refined by golden sections
// around the grid's best.
Fit fit_rmsprop(const std::vector<Element>& elements) {
  const auto at = [&](double log_rate) {
    const double decay = 1 - std::pow(10.0, log_rate);
    return fit_floor(elements, rmsprop_terms(decay), decay);
  };
  constexpr int kSteps = 80;
  double best_log = 0;
  double best = at(0).squared_residual;
  for (int k = 1; k <= kSteps; ++k) {
    const double log_rate = -4.0 * k / kSteps;
    const double residual = at(log_rate).squared_residual;
    if (residual < best) {
      best = residual;
      best_log = log_rate;
    }
  }
  double low = best_log - 4.0 / kSteps, high = std::min(0.0, best_log + 4.0 / kSteps);
  const double ratio = (std::sqrt(5.0) - 1) / 2;
  for (int i = 0; i < 40; ++i) {
    const double left = high - ratio * (high - low), right = low + ratio * (high - low);
    if (at(left).squared_residual < at(right).squared_residual) {
      high = right;
    } else {
      low = left;
    }
  }
  return at((low + high) / 2);
}

enum class Family { kNone, kRmsprop, kAdagrad };

struct RunFit {
  Family family = Family::kNone;
  Fit fit;
  double lr = 0;
  double floor_resolution = 0;  // a floor below this changes no den by kFitTolerance
  size_t elements = 0;
};

RunFit fit_run(const RunUpdates& updates) {
  const std::vector<Element>& elements = updates.elements;
  const Fit constant = fit_floor(elements, [](const Element&) { return 0.0; }, 0);
  const Fit adagrad =
      fit_floor(elements, [](const Element& e) { return e.g1 * e.g1 + e.g0 * e.g0; }, 0);
  const Fit rmsprop = fit_rmsprop(elements);
  RunFit run;
  run.lr = updates.lr;
  run.elements = elements.size();
  std::vector<double> den_squared;
  for (const Element& e : elements) den_squared.push_back(e.den_squared);
  std::nth_element(den_squared.begin(), den_squared.begin() + den_squared.size() / 20,
                   den_squared.end());
  run.floor_resolution = 2 * kFitTolerance * den_squared[den_squared.size() / 20];
  const bool adagrad_better = adagrad.squared_residual <= rmsprop.squared_residual;
  const Fit& best = adagrad_better ? adagrad : rmsprop;
  if (best.fit_share < kFitShare ||
      best.squared_residual * kOverConstant > constant.squared_residual) {
    return run;
  }
  run.family = adagrad_better ? Family::kAdagrad : Family::kRmsprop;
  run.fit = best;
  return run;
}

// The median of |(theta_A - theta_B) - predicted| / |theta_A - theta_B| after step 0, over the
// elements whose difference float32 resolves, with each run's first update predicted from its
// fit; -1 when none resolves.
double first_update_check(const StepValues& a, const StepValues& b, const RunFit& fit_a,
                          const RunFit& fit_b, double lr) {
  const auto den0 = [](const RunFit& fit, double g) {
    const double rate = fit.family == Family::kAdagrad ? 1.0 : 1 - fit.fit.decay;
    return std::sqrt(rate * g * g + std::max(fit.fit.floor, 0.0));
  };
  std::vector<double> errors;
  for (const auto& [name, theta_a] : a) {
    const auto theta_b = b.find(name);
    const auto grad = b.find("grads/" + name.substr(7));
    if (!starts_with(name, "params/") || theta_b == b.end() || grad == b.end()) continue;
    for (size_t i = 0; i < theta_a.values.size(); ++i) {
      const double g = grad->second.values[i];
      const double observed = theta_a.values[i] - theta_b->second.values[i];
      if (g == 0 || std::abs(observed) <= kResolution * std::abs(theta_a.values[i])) continue;
      const double predicted = -lr * g * (1 / den0(fit_a, g) - 1 / den0(fit_b, g));
      errors.push_back(std::abs(observed - predicted) / std::abs(observed));
    }
  }
  return errors.empty() ? -1 : median(errors);
}

// The median first update in learning rates, |g0| / den0, that a fit predicts.
double first_update_in_lr(const StepValues& values, const RunFit& fit) {
  std::vector<double> sizes;
  for (const auto& [name, grads] : values) {
    if (!starts_with(name, "grads/")) continue;
    for (const double g : grads.values) {
      if (g == 0) continue;
      const double rate = fit.family == Family::kAdagrad ? 1.0 : 1 - fit.fit.decay;
      sizes.push_back(std::abs(g) / std::sqrt(rate * g * g + std::max(fit.fit.floor, 0.0)));
    }
  }
  return sizes.empty() ? 0 : median(sizes);
}

bool floor_resolved(const RunFit& run) { return run.fit.floor > run.floor_resolution; }

// Both floors unresolved, or both resolved and within 5% of each other.
bool same_floor(const RunFit& a, const RunFit& b) {
  if (floor_resolved(a) != floor_resolved(b)) return false;
  return !floor_resolved(a) || std::abs(std::log(a.fit.floor / b.fit.floor)) < 0.05;
}

std::string floor_text(const RunFit& run) {
  if (!floor_resolved(run)) {
    return fmt::format("no floor inside the root (|c| below {}: eps after the root, torch's "
                       "placement, or none)",
                       format_number(run.floor_resolution));
  }
  return fmt::format("a floor c = {} inside the root", format_number(run.fit.floor));
}

// Both runs' fits, when both runs recorded steps 0 and 1, the gradients of step 0 agree, the
// learning rates agree and the runs part: what M9 and M10 start from.
struct PairFit {
  int64_t step = 0;
  RunFit a, b;
  double first_update_error = -1;  // first_update_check
  double first_update_lr_a = 0, first_update_lr_b = 0;
};

std::optional<PairFit> fit_pair(const RunPair& runs, const Findings& findings) {
  const std::optional<int64_t> step = first_step_recorded(runs);
  // Step 0: the optimizer states start from their initial values there.
  if (!step || *step != 0 || findings.first_grads_match != true) return std::nullopt;
  const std::optional<RunUpdates> a = run_updates(runs.a, *step);
  const std::optional<RunUpdates> b = run_updates(runs.b, *step);
  if (!a || !b || std::abs(a->lr - b->lr) > 1e-6 * b->lr) return std::nullopt;
  PairFit pair{*step, fit_run(*a), fit_run(*b)};
  if (pair.a.family == Family::kNone || pair.a.family != pair.b.family) return std::nullopt;
  const StepValues first_a = read_values(runs.a, *step);
  const StepValues first_b = read_values(runs.b, *step);
  pair.first_update_error = first_update_check(first_a, first_b, pair.a, pair.b, b->lr);
  pair.first_update_lr_a = first_update_in_lr(first_b, pair.a);
  pair.first_update_lr_b = first_update_in_lr(first_b, pair.b);
  return pair;
}

std::string fit_text(const char* label, const RunFit& run) {
  return fmt::format("{} {:.1f}% of {} elements within {:.0f}%", label, 100 * run.fit.fit_share,
                     run.elements, 100 * kFitTolerance);
}

std::string first_update_text(const PairFit& pair) {
  std::string text = fmt::format(
      "; the first updates they predict move a median element {:.3g} (A) and {:.3g} (B) "
      "learning rates",
      pair.first_update_lr_a, pair.first_update_lr_b);
  if (pair.first_update_error >= 0) {
    text += fmt::format(" and account for theta_A - theta_B after step 0 to a median {:.2g}",
                        pair.first_update_error);
  }
  return text;
}

}  // namespace

std::optional<Diagnosis> rmsprop_defaults_rule(const RunPair& runs, const Findings& findings) {
  const std::optional<PairFit> pair = fit_pair(runs, findings);
  if (!pair || pair->a.family != Family::kRmsprop) return std::nullopt;
  const RunFit& a = pair->a;
  const RunFit& b = pair->b;
  const bool same_decay = std::abs(std::log((1 - a.fit.decay) / (1 - b.fit.decay))) < 0.05;
  if (same_decay && same_floor(a, b)) return std::nullopt;
  return Diagnosis{
      "M9", "RMSprop's defaults: decay and eps placement differ (torch 0.99, eps after the "
            "root; optax 0.9, eps inside)",
      fmt::format("at step {} the gradients agree; each run's update of step {} divides every "
                  "gradient element by its own RMSprop denominator, fitted as "
                  "sqrt((1 - decay) (g1^2 + decay g0^2) + c): A decay {:.4f} with {}, B decay "
                  "{:.4f} with {} ({}; {}){}. The floor is the start of the average times "
                  "decay^2 plus an eps inside the root: these updates cannot tell the two apart",
                  pair->step, pair->step + 1, a.fit.decay, floor_text(a), b.fit.decay,
                  floor_text(b), fit_text("A", a), fit_text("B", b), first_update_text(*pair)),
      "Set RMSprop's decay and eps placement on both sides: torch.optim.RMSprop(lr, alpha=0.99, "
      "eps=1e-8) adds eps after the square root; optax.rmsprop(lr) defaults to decay=0.9, "
      "eps=1e-8 inside it. Port torch's as optax.rmsprop(lr, decay=0.99, eps=1e-8, "
      "eps_in_sqrt=False); in PyTorch only alpha=0.9 can follow optax (torch has no eps inside "
      "the root)."};
}

std::optional<Diagnosis> adagrad_defaults_rule(const RunPair& runs, const Findings& findings) {
  const std::optional<PairFit> pair = fit_pair(runs, findings);
  if (!pair || pair->a.family != Family::kAdagrad) return std::nullopt;
  const RunFit& a = pair->a;
  const RunFit& b = pair->b;
  if (same_floor(a, b)) return std::nullopt;
  return Diagnosis{
      "M10", "Adagrad's defaults: the accumulator's start and eps differ (torch 0 and 1e-10 "
             "after the root; optax 0.1 and 1e-7 inside)",
      fmt::format("at step {} the gradients agree; each run's update of step {} divides every "
                  "gradient element by the root of its sum of squares, fitted as "
                  "sqrt(g0^2 + g1^2 + c): A with {}, B with {} ({}; {}){}. The floor is the "
                  "accumulator's start plus an eps inside the root: these updates cannot tell "
                  "the two apart",
                  pair->step, pair->step + 1, floor_text(a), floor_text(b), fit_text("A", a),
                  fit_text("B", b), first_update_text(*pair)),
      "Set Adagrad's start and eps on both sides: torch.optim.Adagrad(lr) starts the sum at 0 "
      "and adds eps=1e-10 after the square root, so its first step is lr sign(g); "
      "optax.adagrad(lr) starts it at 0.1 with eps=1e-7 inside. Port torch's as "
      "optax.adagrad(lr, initial_accumulator_value=0.0, eps=1e-10) (the same wherever |g| >> "
      "1e-5); or follow optax in PyTorch with torch.optim.Adagrad(lr, "
      "initial_accumulator_value=0.1, eps=1e-7) (eps then after the root, negligible beside "
      "0.1)."};
}

}  // namespace parity::compare
