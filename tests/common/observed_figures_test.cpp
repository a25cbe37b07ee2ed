// Figures a scenario case's run computed, the fact-check placeholders they fill and the figure
// conditions a case expects (parity/common/observed_figures.h). The expected texts follow from
// the format specs: fmt's "{:.4g}" and "{:.3f}".
#include "parity/common/observed_figures.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "parity/common/error.h"

namespace parity {
namespace {

using ::testing::HasSubstr;

ObservedFigures sample() {
  ObservedFigures figures;
  figures.set("grad_norm_ratio.first", 8.00001);
  figures.set("grad_norm_ratio.last", 30.71);
  figures.set_text("error", "unbound axis name: devices");
  return figures;
}

TEST(ObservedFigures, FillsPlaceholdersWithTheRunsNumbersAndTexts) {
  const ObservedFigures figures = sample();
  EXPECT_EQ(figures.fill("{grad_norm_ratio.first}x at step 0, {grad_norm_ratio.last:.3f}x at "
                         "the last; JAX says '{error}' {{literally}}"),
            "8x at step 0, 30.710x at the last; JAX says 'unbound axis name: devices' "
            "{literally}");
  EXPECT_EQ(figures.fill("no placeholder"), "no placeholder");
}

TEST(ObservedFigures, AFigureTheRunDidNotComputeNamesItAndTheOnesItDid) {
  try {
    sample().fill("{loss_ratio.last} and {error}");
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_THAT(error.what(), HasSubstr("the run computed no figure loss_ratio.last"));
    EXPECT_THAT(error.what(), HasSubstr("grad_norm_ratio.first, grad_norm_ratio.last, error"));
  }
}

TEST(ObservedFigures, SettingANameAgainReplacesItInPlace) {
  ObservedFigures figures = sample();
  figures.set_text("grad_norm_ratio.first", "none");
  EXPECT_EQ(figures.number("grad_norm_ratio.first"), std::nullopt);
  const auto listing = figures.listing();
  ASSERT_EQ(listing.size(), 3u);
  EXPECT_EQ(listing[0], std::make_pair(std::string("grad_norm_ratio.first"), std::string("none")));
  EXPECT_EQ(listing[1].second, "30.71");
}

TEST(ObservedFigures, MalformedPlaceholdersAreRefusedWithTheFix) {
  EXPECT_THROW(placeholders("{open"), InputError);
  EXPECT_THROW(placeholders("close}"), InputError);
  EXPECT_THROW(placeholders("{}"), InputError);
  EXPECT_THROW(placeholders("{a{b}"), InputError);
  const auto found = placeholders("{a} {{b}} {c:.2f}");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0], std::make_pair(std::string("a"), std::string("")));
  EXPECT_EQ(found[1], std::make_pair(std::string("c"), std::string(".2f")));
  EXPECT_THROW(sample().fill("{error:.2f} {grad_norm_ratio.last:%}"), InputError);
}

TEST(FigureCondition, ParsesTheThreeFormsAndJudgesThem) {
  const ObservedFigures figures = sample();
  const FigureCondition within = parse_figure_condition("grad_norm_ratio.first = 8 ± 0.01");
  EXPECT_EQ(within.name, "grad_norm_ratio.first");
  EXPECT_EQ(within.op, '=');
  EXPECT_DOUBLE_EQ(within.value, 8);
  EXPECT_DOUBLE_EQ(within.tolerance, 0.01);
  EXPECT_TRUE(condition_holds(within, figures));
  EXPECT_TRUE(condition_holds(parse_figure_condition("grad_norm_ratio.last > 9"), figures));
  EXPECT_TRUE(condition_holds(parse_figure_condition("grad_norm_ratio.first<8.1"), figures));
  EXPECT_TRUE(condition_holds(parse_figure_condition("grad_norm_ratio.first = 8 +- 1e-4"),
                              figures));

  std::string why;
  EXPECT_FALSE(condition_holds(parse_figure_condition("grad_norm_ratio.last < 9"), figures, &why));
  EXPECT_EQ(why, "grad_norm_ratio.last is 30.71, not < 9");
  EXPECT_FALSE(condition_holds(parse_figure_condition("steps > 1"), figures, &why));
  EXPECT_EQ(why, "the run computed no steps");
  EXPECT_FALSE(condition_holds(parse_figure_condition("error > 1"), figures, &why));
  EXPECT_EQ(why, "error is not a number");
}

TEST(FigureCondition, MalformedConditionsSayTheForm) {
  for (const char* bad : {"ratio", "ratio > ", "> 3", "ratio = 8", "ratio = 8 ± -1",
                          "two words > 1", "ratio > nan"}) {
    try {
      parse_figure_condition(bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& error) {
      EXPECT_THAT(error.what(), HasSubstr("'name = number ± tolerance'")) << bad;
    }
  }
}

}  // namespace
}  // namespace parity
