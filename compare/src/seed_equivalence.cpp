#include "parity/compare/seed_equivalence.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <numeric>

#include "parity/common/error.h"

namespace parity::compare {
namespace {

constexpr int64_t kMostSeeds = 100000;

struct Sample {
  int64_t n = 0;
  double mean = 0;
  double variance = 0;  // (n - 1) denominator
};

Sample describe(const std::vector<double>& values, const char* side) {
  if (values.size() < 2) {
    throw InputError(fmt::format(
        "equivalence over seeds: producer {} has {} value(s); a spread needs at least 2 seeds "
        "per producer (--seeds 2 or more)",
        side, values.size()));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      throw InputError(fmt::format(
          "equivalence over seeds: producer {}'s value for seed #{} is {}; every seed's run "
          "must finish with a finite value",
          side, i, values[i]));
    }
  }
  Sample sample;
  sample.n = static_cast<int64_t>(values.size());
  sample.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(sample.n);
  double squares = 0;
  for (double value : values) squares += (value - sample.mean) * (value - sample.mean);
  sample.variance = squares / static_cast<double>(sample.n - 1);
  return sample;
}

// Welch-Satterthwaite degrees of freedom of the difference of two means.
double welch_degrees_of_freedom(const Sample& a, const Sample& b) {
  const double va = a.variance / static_cast<double>(a.n);
  const double vb = b.variance / static_cast<double>(b.n);
  const double denominator = va * va / static_cast<double>(a.n - 1) +
                             vb * vb / static_cast<double>(b.n - 1);
  if (denominator == 0) return static_cast<double>(a.n + b.n - 2);  // both constant
  return (va + vb) * (va + vb) / denominator;
}

// 2 T_df(margin / se - t_crit) - 1, at least 0; 1 when se is 0 (no spread at all).
double tost_power(double margin, double standard_error, double degrees_of_freedom, double alpha) {
  if (standard_error == 0) return 1.0;
  const boost::math::students_t t(degrees_of_freedom);
  const double critical = boost::math::quantile(t, 1 - alpha);
  return std::max(0.0, 2 * boost::math::cdf(t, margin / standard_error - critical) - 1);
}

// TOST's power with n seeds on each side, the spreads as observed.
double power_with_seeds(const Sample& a, const Sample& b, int64_t n,
                        const EquivalenceOptions& options) {
  Sample sized_a = a;
  Sample sized_b = b;
  sized_a.n = sized_b.n = n;
  const double se = std::sqrt((a.variance + b.variance) / static_cast<double>(n));
  return tost_power(options.margin, se, welch_degrees_of_freedom(sized_a, sized_b),
                    options.alpha);
}

// The least n >= `from` whose power reaches the target (power grows with n), or -1.
int64_t seeds_for_power(const Sample& a, const Sample& b, int64_t from,
                        const EquivalenceOptions& options) {
  const auto enough = [&](int64_t n) {
    return power_with_seeds(a, b, n, options) >= options.target_power;
  };
  if (enough(from)) return from;
  int64_t low = from;  // not enough
  int64_t high = from;
  while (!enough(high)) {
    if (high >= kMostSeeds) return -1;
    low = high;
    high = std::min(high * 2, kMostSeeds);
  }
  while (high - low > 1) {
    const int64_t middle = low + (high - low) / 2;
    (enough(middle) ? high : low) = middle;
  }
  return high;
}

void check_options(const EquivalenceOptions& options) {
  if (!(options.margin > 0) || !std::isfinite(options.margin)) {
    throw InputError(fmt::format(
        "equivalence over seeds: margin {} must be a positive number (the largest difference "
        "of means that still counts as equivalent)",
        options.margin));
  }
  if (!(options.alpha > 0 && options.alpha < 0.5)) {
    throw InputError(fmt::format("equivalence over seeds: alpha {} must lie in (0, 0.5)",
                                 options.alpha));
  }
}

}  // namespace

std::string equivalence_verdict_name(EquivalenceVerdict verdict) {
  switch (verdict) {
    case EquivalenceVerdict::kEquivalent: return "equivalent";
    case EquivalenceVerdict::kDifferent: return "different";
    case EquivalenceVerdict::kInconclusive: return "inconclusive";
  }
  return "inconclusive";
}

EquivalenceResult test_equivalence(const std::vector<double>& a, const std::vector<double>& b,
                                   const EquivalenceOptions& options) {
  check_options(options);
  const Sample sa = describe(a, "A");
  const Sample sb = describe(b, "B");
  EquivalenceResult result;
  result.n_a = sa.n;
  result.n_b = sb.n;
  result.mean_a = sa.mean;
  result.mean_b = sb.mean;
  result.sd_a = std::sqrt(sa.variance);
  result.sd_b = std::sqrt(sb.variance);
  result.difference = sa.mean - sb.mean;
  result.standard_error = std::sqrt(sa.variance / static_cast<double>(sa.n) +
                                    sb.variance / static_cast<double>(sb.n));
  result.degrees_of_freedom = welch_degrees_of_freedom(sa, sb);
  const double d = result.difference;
  const double m = options.margin;
  const double se = result.standard_error;
  if (se == 0) {
    // Both samples constant: the difference is known exactly.
    result.interval_low = result.interval_high = d;
    result.p_lower = d > -m ? 0.0 : 1.0;
    result.p_upper = d < m ? 0.0 : 1.0;
    result.p_difference = d == 0 ? 1.0 : 0.0;
  } else {
    const boost::math::students_t t(result.degrees_of_freedom);
    const double critical = boost::math::quantile(t, 1 - options.alpha);
    result.interval_low = d - critical * se;
    result.interval_high = d + critical * se;
    result.p_lower = boost::math::cdf(boost::math::complement(t, (d + m) / se));
    result.p_upper = boost::math::cdf(t, (d - m) / se);
    result.p_difference = 2 * boost::math::cdf(boost::math::complement(t, std::abs(d) / se));
  }
  result.p_equivalence = std::max(result.p_lower, result.p_upper);
  result.power = tost_power(m, se, result.degrees_of_freedom, options.alpha);
  result.seeds_needed = seeds_for_power(sa, sb, std::max(sa.n, sb.n), options);
  if (result.p_equivalence < options.alpha) {
    result.verdict = EquivalenceVerdict::kEquivalent;
  } else if (result.p_difference < options.alpha) {
    result.verdict = EquivalenceVerdict::kDifferent;
  } else {
    result.verdict = EquivalenceVerdict::kInconclusive;
  }
  return result;
}

}  // namespace parity::compare
