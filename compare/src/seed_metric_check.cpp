// One final value over seeds: every run's value of each set, the equivalence test of their
// means (seed_equivalence.h), and the check that states it.
#include "seed_metric_check.h"

#include <fmt/format.h>

#include <algorithm>

#include "figures.h"

namespace parity::compare {
namespace {

std::string interval_text(const EquivalenceResult& test, double confidence) {
  return fmt::format("{:.0f}% interval [{}, {}]", confidence * 100,
                     format_number(test.interval_low), format_number(test.interval_high));
}

std::string means_text(const EquivalenceResult& test) {
  return fmt::format("A {} ± {} ({} seeds), B {} ± {} ({} seeds)", format_number(test.mean_a),
                     format_number(test.sd_a), test.n_a, format_number(test.mean_b),
                     format_number(test.sd_b), test.n_b);
}

std::string summary_of(const EquivalenceResult& test, double margin, double confidence) {
  const std::string figures =
      fmt::format("{}; difference {}, {}", means_text(test), format_number(test.difference),
                  interval_text(test, confidence));
  switch (test.verdict) {
    case EquivalenceVerdict::kEquivalent:
      return fmt::format(
          "Equivalent within ±{}: {} inside the margin (TOST p = {}){}.", format_number(margin),
          figures, format_number(test.p_equivalence),
          test.p_difference < 1 - confidence
              ? fmt::format("; the means differ (Welch p = {}), by less than the margin",
                            format_number(test.p_difference))
              : "");
    case EquivalenceVerdict::kDifferent:
      return fmt::format(
          "Different: {}; Welch's test rejects equal means (p = {}) and the interval reaches "
          "beyond ±{}.",
          figures, format_number(test.p_difference), format_number(margin));
    case EquivalenceVerdict::kInconclusive:
      break;
  }
  return fmt::format(
      "Inconclusive: {} crosses the margin ±{} and equal means are not rejected (Welch p = {}); "
      "{}.",
      figures, format_number(margin), format_number(test.p_difference),
      test.seeds_needed < 0
          ? "no count of seeds up to 100,000 gives TOST 80% power with these spreads"
          : fmt::format("about {} seeds per producer would give TOST 80% power with these "
                        "spreads: {} more",
                        test.seeds_needed,
                        test.seeds_needed - std::min(test.n_a, test.n_b)));
}

CheckStatus status_of(EquivalenceVerdict verdict) {
  switch (verdict) {
    case EquivalenceVerdict::kEquivalent:
      return CheckStatus::kPass;
    case EquivalenceVerdict::kDifferent:
      return CheckStatus::kFail;
    case EquivalenceVerdict::kInconclusive:
      break;
  }
  return CheckStatus::kWarn;
}

}  // namespace

Check check_seed_metric(const SeedMetric& metric, const SeedValues& a, const SeedValues& b,
                        const EquivalenceOptions& options, SeedDistribution& distribution) {
  Check check;
  check.id = std::string("seeds_") + metric.name;
  check.title = fmt::format("{} over seeds", metric.title);
  distribution.metric = metric.name;
  distribution.title = metric.title;
  distribution.seeds_a = a.labels;
  distribution.seeds_b = b.labels;
  distribution.values_a = a.values;
  distribution.values_b = b.values;
  distribution.margin = options.margin;
  distribution.confidence = 1 - 2 * options.alpha;
  if (a.values.size() < 2 || b.values.size() < 2) {
    check.status = CheckStatus::kNotRecorded;
    check.summary = fmt::format(
        "Not judged: {} finished run(s) of A and {} of B; the test needs at least 2 per side.",
        a.values.size(), b.values.size());
    distribution.verdict = "not judged";
    return check;
  }
  const EquivalenceResult test = test_equivalence(a.values, b.values, options);
  distribution.mean_a = test.mean_a;
  distribution.mean_b = test.mean_b;
  distribution.interval_low = test.interval_low;
  distribution.interval_high = test.interval_high;
  distribution.verdict = equivalence_verdict_name(test.verdict);
  check.status = status_of(test.verdict);
  check.summary = summary_of(test, options.margin, distribution.confidence);
  check.figures = {
      {"seeds_a", static_cast<double>(test.n_a), ""},
      {"seeds_b", static_cast<double>(test.n_b), ""},
      {"mean_a", test.mean_a, ""},
      {"mean_b", test.mean_b, ""},
      {"sd_a", test.sd_a, ""},
      {"sd_b", test.sd_b, ""},
      {"difference", test.difference, ""},
      {"interval_low", test.interval_low, ""},
      {"interval_high", test.interval_high, ""},
      {"margin", options.margin, ""},
      {"p_equivalence", test.p_equivalence, ""},
      {"p_difference", test.p_difference, ""},
      {"degrees_of_freedom", test.degrees_of_freedom, ""},
      {"power", test.power, ""},
      {"seeds_needed", static_cast<double>(test.seeds_needed), ""},
  };
  for (const auto& [label, set] : {std::pair{'A', &a}, std::pair{'B', &b}}) {
    for (size_t i = 0; i < set->values.size(); ++i) {
      check.details.push_back(
          fmt::format("{} {}: {}", label, set->labels[i], format_number(set->values[i])));
    }
  }
  return check;
}

}  // namespace parity::compare
