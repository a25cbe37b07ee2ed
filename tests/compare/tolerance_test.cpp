// The tolerance rule |a - b| <= atol + rtol * |b| (B the reference), its defaults per dtype, the
// approximate lane, and the verdict's names and exit codes. The values are dyadic fractions, so
// every expected result is exact and worked out by hand in the comments.
#include "parity/compare/tolerance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace parity::compare {
namespace {

using ::testing::HasSubstr;

TEST(CompareTolerance, AllowanceIsAtolPlusRtolTimesTheReference) {
  EXPECT_EQ(allowed_difference(2, 0.25, 0.5), 1.0);   // 0.5 + 0.25 * 2
  EXPECT_EQ(allowed_difference(-4, 0.25, 0.5), 1.5);  // 0.5 + 0.25 * |-4|
  EXPECT_EQ(allowed_difference(0, 0.25, 0.5), 0.5);   // atol alone at zero
}

TEST(CompareTolerance, BoundaryIsInclusive) {
  // b = 2: allowed 1.0, so a in [1, 3] matches.
  EXPECT_TRUE(is_close(3.0, 2.0, 0.25, 0.5));
  EXPECT_TRUE(is_close(1.0, 2.0, 0.25, 0.5));
  EXPECT_FALSE(is_close(3.0625, 2.0, 0.25, 0.5));
  EXPECT_FALSE(is_close(0.9375, 2.0, 0.25, 0.5));
}

TEST(CompareTolerance, RunBIsTheReference) {
  // |3.125 - 2| = 1.125: against b = 2 the allowance is 1.0, against b = 3.125 it is
  // 0.5 + 0.25 * 3.125 = 1.28125.
  EXPECT_FALSE(is_close(3.125, 2.0, 0.25, 0.5));
  EXPECT_TRUE(is_close(2.0, 3.125, 0.25, 0.5));
}

TEST(CompareTolerance, NanNeverMatchesEqualInfinitiesDo) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(is_close(nan, nan, 1, 1));
  EXPECT_FALSE(is_close(nan, 0, 1, 1));
  EXPECT_FALSE(is_close(0, nan, 1, 1));
  EXPECT_TRUE(is_close(inf, inf, 0, 0));
  EXPECT_FALSE(is_close(inf, -inf, 1, 1));
  EXPECT_FALSE(is_close(1e308, inf, 1, 1));
  EXPECT_FALSE(is_close(inf, 1e308, 1, 1));
}

TEST(CompareTolerance, DefaultsAreAssertClosesPerDtype) {
  struct Expected {
    const char* dtype;
    double rtol;
    double atol;
    const char* torch_name;
  };
  for (const Expected& expected :
       {Expected{"f32", 1.3e-6, 1e-5, "float32"}, Expected{"f16", 1e-3, 1e-5, "float16"},
        Expected{"bf16", 1.6e-2, 1e-5, "bfloat16"}, Expected{"f64", 1e-7, 1e-7, "float64"}}) {
    const std::optional<Tolerance> tolerance = assert_close_tolerance(expected.dtype);
    ASSERT_TRUE(tolerance) << expected.dtype;
    EXPECT_EQ(tolerance->rtol, expected.rtol) << expected.dtype;
    EXPECT_EQ(tolerance->atol, expected.atol) << expected.dtype;
    EXPECT_EQ(tolerance->allowed_bad_steps, 0);
    EXPECT_THAT(tolerance->source, HasSubstr("torch.testing.assert_close"));
    EXPECT_THAT(tolerance->source, HasSubstr(expected.torch_name));
  }
  EXPECT_FALSE(assert_close_tolerance("f8"));
  EXPECT_FALSE(assert_close_tolerance("float32"));  // run.json spells it f32
}

TEST(CompareTolerance, Float32LossExample) {
  // A loss of 2 in f32: allowed 1e-5 + 1.3e-6 * 2 = 1.26e-5.
  const Tolerance f32 = *assert_close_tolerance("f32");
  EXPECT_DOUBLE_EQ(allowed_difference(2.0, f32.rtol, f32.atol), 1.26e-5);
  EXPECT_TRUE(is_close(2.0000125, 2.0, f32.rtol, f32.atol));
  EXPECT_FALSE(is_close(2.0000127, 2.0, f32.rtol, f32.atol));
}

TEST(CompareTolerance, LooserOfTwoDtypesWins) {
  const Tolerance f32 = *assert_close_tolerance("f32");
  const Tolerance bf16 = *assert_close_tolerance("bf16");
  const Tolerance f64 = *assert_close_tolerance("f64");
  EXPECT_EQ(looser_of(f32, bf16).rtol, bf16.rtol);
  EXPECT_EQ(looser_of(bf16, f32).rtol, bf16.rtol);
  EXPECT_EQ(looser_of(f64, f32).rtol, f32.rtol);
  EXPECT_EQ(looser_of(f64, f32).atol, f32.atol);
}

TEST(CompareTolerance, ApproximateLaneIsOnePercentPastOneHundredSteps) {
  EXPECT_EQ(default_allowed_bad_steps(0), 0);
  EXPECT_EQ(default_allowed_bad_steps(10), 0);
  EXPECT_EQ(default_allowed_bad_steps(100), 0);
  EXPECT_EQ(default_allowed_bad_steps(101), 1);
  EXPECT_EQ(default_allowed_bad_steps(199), 1);
  EXPECT_EQ(default_allowed_bad_steps(200), 2);
  EXPECT_EQ(default_allowed_bad_steps(1000), 10);
}

TEST(CompareTolerance, TensorDefaultsAreTheMeasuredOnes) {
  const Tolerance tensors = default_tensor_tolerance();
  EXPECT_EQ(tensors.rtol, kTensorRtol);
  EXPECT_EQ(tensors.atol, kTensorAtol);
  EXPECT_THAT(tensors.source, HasSubstr("measured"));
}

TEST(CompareVerdict, NamesAndExitCodes) {
  EXPECT_STREQ(to_string(Verdict::kEquivalent), "equivalent");
  EXPECT_STREQ(to_string(Verdict::kNotEquivalent), "not equivalent");
  EXPECT_STREQ(to_string(Verdict::kIncomplete), "incomplete");
  EXPECT_STREQ(to_string(CheckStatus::kPass), "pass");
  EXPECT_STREQ(to_string(CheckStatus::kFail), "fail");
  EXPECT_STREQ(to_string(CheckStatus::kWarn), "warn");
  EXPECT_STREQ(to_string(CheckStatus::kNotRecorded), "not recorded");
  EXPECT_EQ(exit_code(Verdict::kEquivalent), 0);
  EXPECT_EQ(exit_code(Verdict::kNotEquivalent), 1);
  EXPECT_EQ(exit_code(Verdict::kIncomplete), 3);
}

}  // namespace
}  // namespace parity::compare
