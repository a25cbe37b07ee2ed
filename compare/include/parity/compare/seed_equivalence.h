// Statistical equivalence of two producers over seeds: one final value (loss, accuracy) per seed
// and producer, judged by Schuirmann's two one-sided tests (TOST) on Welch's t statistic, for
// runs whose RNG streams differ by design (PyTorch's and JAX's dropout masks can never agree).
//
// Welch's test does not assume equal variances; the one-sided p-values are those of
// scipy.stats.ttest_ind(a, b -/+ margin, equal_var=False, alternative="greater"/"less"), and
// tests/compare/seed_equivalence_test.cpp holds them to values scipy computed. The Student t
// distribution is Boost.Math's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parity::compare {

struct EquivalenceOptions {
  double margin = 0;  // equivalence band: |mean(a) - mean(b)| < margin
  double alpha = 0.05;
  double target_power = 0.8;  // for seeds_needed
};

// Lakens (2017) reads TOST and the test of equal means together: equivalent when TOST rejects
// "the difference is at least the margin"; different when only the test of equal means rejects;
// inconclusive when neither does (too few seeds for this spread).
enum class EquivalenceVerdict { kEquivalent, kDifferent, kInconclusive };
std::string equivalence_verdict_name(EquivalenceVerdict verdict);

struct EquivalenceResult {
  int64_t n_a = 0, n_b = 0;
  double mean_a = 0, mean_b = 0;
  double sd_a = 0, sd_b = 0;  // sample standard deviations (n - 1)
  double difference = 0;      // mean_a - mean_b
  double standard_error = 0;  // Welch's: sqrt(sd_a^2 / n_a + sd_b^2 / n_b)
  double degrees_of_freedom = 0;  // Welch-Satterthwaite
  // The 100 (1 - 2 alpha)% interval of the difference: TOST rejects exactly when it lies
  // inside (-margin, margin).
  double interval_low = 0, interval_high = 0;
  double p_lower = 0;        // H0: difference <= -margin
  double p_upper = 0;        // H0: difference >= margin
  double p_equivalence = 0;  // max(p_lower, p_upper)
  double p_difference = 0;   // Welch's two-sided test, H0: difference = 0
  // TOST's power if the true difference were 0 and the spreads what these samples show
  // (the normal-theory approximation 2 T_df(margin / se - t_crit) - 1, at least 0).
  double power = 0;
  // Seeds per producer at which that power reaches target_power (equal counts on both sides),
  // at least the larger of n_a, n_b; -1 when no count up to 100000 reaches it.
  int64_t seeds_needed = 0;
  EquivalenceVerdict verdict = EquivalenceVerdict::kInconclusive;
};

// InputError unless each side has at least 2 finite values, the margin is positive and finite
// and alpha lies in (0, 0.5).
EquivalenceResult test_equivalence(const std::vector<double>& a, const std::vector<double>& b,
                                   const EquivalenceOptions& options);

}  // namespace parity::compare
