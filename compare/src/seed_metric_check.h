// The check of one final value over seeds (seed_sets.h): its distribution in each set and the
// two-sided equivalence test of the means.
#pragma once

#include <string>
#include <vector>

#include "parity/compare/result.h"
#include "parity/compare/seed_equivalence.h"

namespace parity::compare {

// A final value a run records in run.json's results.
struct SeedMetric {
  const char* name;   // "test_loss"
  const char* title;  // "Test loss"
  bool accuracy;      // judged with the accuracy margin, else the loss margin
};

// One set's values of a metric, one per finished run, with the runs' labels.
struct SeedValues {
  std::vector<std::string> labels;
  std::vector<double> values;
};

// Pass when equivalent within options.margin, fail when different, warn when inconclusive;
// "not recorded" when a side has fewer than two values. Fills `distribution` for the charts.
Check check_seed_metric(const SeedMetric& metric, const SeedValues& a, const SeedValues& b,
                        const EquivalenceOptions& options, SeedDistribution& distribution);

}  // namespace parity::compare
