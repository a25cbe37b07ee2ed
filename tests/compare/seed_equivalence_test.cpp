// TOST on Welch's t (compare/seed_equivalence.h) against scipy.stats (tost_vectors.h, generated
// by scripts/gen_tost_vectors.py with Debian's python3-scipy 1.10.1), and the verdicts and
// refusals that follow from it.
#include "parity/compare/seed_equivalence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "parity/common/error.h"
#include "tost_vectors.h"

namespace parity::compare {
namespace {

using ::testing::HasSubstr;

class SeedEquivalenceVsScipy : public ::testing::TestWithParam<testing::TostVector> {};

TEST_P(SeedEquivalenceVsScipy, PValuesIntervalAndPowerMatch) {
  const testing::TostVector& v = GetParam();
  const EquivalenceResult r = test_equivalence(v.a, v.b, {v.margin});
  // Boost.Math's and scipy's Student t tails agree to about 1e-11 relative here (Welch's df is
  // fractional, down to 1.4); p-values near 1e-10 are compared relatively. scipy 1.10's t.ppf
  // (cephes stdtrit) is good to about 1e-9 of the quantile, so the interval's ends are held to
  // 1e-8 of its width.
  const auto near = [](double expected) { return std::abs(expected) * 1e-9 + 1e-12; };
  const double width = v.interval_high - v.interval_low;
  EXPECT_NEAR(r.p_lower, v.p_lower, near(v.p_lower));
  EXPECT_NEAR(r.p_upper, v.p_upper, near(v.p_upper));
  EXPECT_NEAR(r.p_difference, v.p_difference, near(v.p_difference));
  EXPECT_NEAR(r.interval_low, v.interval_low, 1e-8 * width);
  EXPECT_NEAR(r.interval_high, v.interval_high, 1e-8 * width);
  EXPECT_NEAR(r.power, v.power, 1e-9);
  EXPECT_EQ(r.seeds_needed, v.seeds_needed);
  EXPECT_DOUBLE_EQ(r.p_equivalence, std::max(r.p_lower, r.p_upper));
}

INSTANTIATE_TEST_SUITE_P(Scipy, SeedEquivalenceVsScipy,
                         ::testing::ValuesIn(testing::tost_vectors()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

const testing::TostVector& vector_named(const std::string& name) {
  for (const auto& v : testing::tost_vectors()) {
    if (name == v.name) return v;
  }
  throw std::runtime_error("no TOST vector " + name);
}

EquivalenceVerdict verdict_of(const std::string& name) {
  const testing::TostVector& v = vector_named(name);
  return test_equivalence(v.a, v.b, {v.margin}).verdict;
}

// Verdicts from scipy's p-values at alpha 0.05: TOST 3e-4 (equivalent); TOST 0.23 and Welch
// 0.87 (inconclusive); TOST 0.99998 and Welch 4.6e-8 (different).
TEST(SeedEquivalence, VerdictsFollowTostThenWelch) {
  EXPECT_EQ(verdict_of("CloseLossesWideMargin"), EquivalenceVerdict::kEquivalent);
  EXPECT_EQ(verdict_of("CloseLossesNarrowMargin"), EquivalenceVerdict::kInconclusive);
  EXPECT_EQ(verdict_of("ShiftedLosses"), EquivalenceVerdict::kDifferent);
  EXPECT_EQ(verdict_of("TwoSeedsEach"), EquivalenceVerdict::kInconclusive);
}

// With no spread at all the difference is known: inside the margin it is equivalent, outside
// different, and one more seed would change nothing.
TEST(SeedEquivalence, ConstantSamplesAreDecidedByTheirDifference) {
  const EquivalenceResult inside = test_equivalence({0.5, 0.5, 0.5}, {0.51, 0.51}, {0.02});
  EXPECT_EQ(inside.verdict, EquivalenceVerdict::kEquivalent);
  EXPECT_EQ(inside.standard_error, 0.0);
  EXPECT_EQ(inside.seeds_needed, 3);
  const EquivalenceResult outside = test_equivalence({0.5, 0.5}, {0.6, 0.6}, {0.02});
  EXPECT_EQ(outside.verdict, EquivalenceVerdict::kDifferent);
}

TEST(SeedEquivalence, RefusesFewerThanTwoSeedsNonFiniteValuesAndBadMargins) {
  EXPECT_THAT([] { test_equivalence({0.5}, {0.5, 0.6}, {0.1}); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("producer A has 1 value(s)")));
  EXPECT_THAT(
      [] { test_equivalence({0.5, 0.6}, {0.5, std::numeric_limits<double>::quiet_NaN()}, {0.1}); },
      ::testing::ThrowsMessage<InputError>(HasSubstr("producer B's value for seed #1 is nan")));
  EXPECT_THAT([] { test_equivalence({0.5, 0.6}, {0.5, 0.6}, {0.0}); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("must be a positive number")));
  EXPECT_THAT([] { test_equivalence({0.5, 0.6}, {0.5, 0.6}, {0.1, 0.5}); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("alpha 0.5 must lie in (0, 0.5)")));
}

}  // namespace
}  // namespace parity::compare
