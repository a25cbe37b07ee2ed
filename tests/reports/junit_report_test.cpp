// junit.xml: well-formed (a real parser reads it), counts that match the checks, failures that
// carry the details, not-recorded checks skipped.
#include <gtest/gtest.h>

#include <regex>

#include "parity/reports/reports.h"
#include "report_test_util.h"
#include "sample_results.h"
#include "test_files.h"

namespace parity::reports {
namespace {

using testing::count_of;
using testing::failing_result;
using testing::passing_result;
using testing::TempDir;

TEST(JunitReport, IsWellFormedWithHostileStrings) {
  TempDir dir;
  const std::string xml = render_junit(failing_result());
  testing::expect_well_formed_xml(xml, dir.path(), "junit.xml");
  EXPECT_EQ(count_of(xml, "<script"), 0u);
  EXPECT_EQ(count_of(xml, "\x07"), 0u);
  EXPECT_EQ(count_of(xml, "\x1b"), 0u);
  EXPECT_NE(xml.find("bell\\x07here"), std::string::npos);
  EXPECT_NE(xml.find("]]&gt;"), std::string::npos);
}

TEST(JunitReport, CountsMatchTheChecks) {
  const std::string xml = render_junit(failing_result());
  EXPECT_NE(xml.find("<testsuite name=\"parity compare\" tests=\"9\" failures=\"3\" errors=\"0\" "
                     "skipped=\"1\""),
            std::string::npos)
      << xml;
  EXPECT_EQ(count_of(xml, "<testcase "), 9u);
  EXPECT_EQ(count_of(xml, "<failure "), 3u);
  EXPECT_EQ(count_of(xml, "<skipped "), 1u);
  EXPECT_EQ(count_of(xml, "<testsuite "), 1u);

  const std::string passing = render_junit(passing_result());
  EXPECT_NE(passing.find("tests=\"4\" failures=\"0\" errors=\"0\" skipped=\"0\""),
            std::string::npos);
  EXPECT_EQ(count_of(passing, "<failure"), 0u);
}

TEST(JunitReport, FailuresCarryTheDetails) {
  const std::string xml = render_junit(failing_result());
  const std::regex loss_failure(
      "<testcase classname=\"parity.compare\" name=\"loss_curve\">\\s*<failure message=\"Loss "
      "differs beyond tolerance from step 1; A is NaN from step 150.\" type=\"fail\">([^<]*)"
      "</failure>");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(xml, match, loss_failure)) << xml;
  const std::string text = match[1].str();
  EXPECT_NE(text.find("first failing step: 1"), std::string::npos) << text;
  EXPECT_NE(text.find("max abs error: 0.8412"), std::string::npos) << text;
  EXPECT_NE(text.find("step 150: loss A is NaN, loss B 0.4797"), std::string::npos) << text;
  EXPECT_NE(xml.find("tensor step=1 tensor=layers.0.weight max |Δ|=0.0731"), std::string::npos);
  EXPECT_NE(xml.find("<skipped message=\"not recorded: Neither run recorded a single-device "
                     "reference ]]&gt;.\"/>"),
            std::string::npos);
  EXPECT_NE(xml.find("<system-out>warning: B records no RNG keys"), std::string::npos);
  EXPECT_NE(xml.find("<property name=\"diagnosis P2\" value=\"Gradients summed, not averaged\"/>"),
            std::string::npos);
}

TEST(JunitReport, MultiLineTextInAttributesSurvivesAsReferences) {
  compare::ComparisonResult result = passing_result();
  result.headline = "two\nlines";
  EXPECT_NE(render_junit(result).find("value=\"two&#10;lines\""), std::string::npos);
}

}  // namespace
}  // namespace parity::reports
