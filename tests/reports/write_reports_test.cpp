// write_reports and the GitHub step summary, on real files: four files and nothing else, atomic
// replacement, an InputError for a directory that cannot be written, and the 1 MiB limit.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "parity/reports/reports.h"
#include "sample_results.h"
#include "test_files.h"

namespace parity::reports {
namespace {

namespace fs = std::filesystem;
using testing::expect_input_error;
using testing::failing_result;
using testing::passing_result;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(WriteReports, WritesTheFourFilesAndNothingElse) {
  TempDir temp;
  const fs::path dir = temp.path("nested/reports");  // created with its parents
  const compare::ComparisonResult result = failing_result();
  write_reports(result, dir);
  EXPECT_EQ(names_in(dir),
            (std::vector<std::string>{"junit.xml", "report.html", "report.json", "report.md"}));
  EXPECT_EQ(read_bytes(dir / kHtmlFile), render_html(result));
  EXPECT_EQ(read_bytes(dir / kMarkdownFile), render_markdown(result));
  EXPECT_EQ(read_bytes(dir / kJsonFile), render_json(result));
  EXPECT_EQ(read_bytes(dir / kJunitFile), render_junit(result));
}

TEST(WriteReports, ReplacesEarlierReports) {
  TempDir temp;
  write_reports(failing_result(), temp.path());
  write_reports(passing_result(), temp.path());
  EXPECT_EQ(nlohmann::json::parse(read_bytes(temp.path(kJsonFile)))["verdict"], "equivalent");
  EXPECT_EQ(names_in(temp.path()).size(), 4u);  // no temporary file left
}

TEST(WriteReports, RefusesADirectoryThatCannotBeCreated) {
  TempDir temp;
  write_bytes(temp.path("file"), "not a directory");
  expect_input_error(
      [&] { write_reports(passing_result(), temp.path("file") / "reports"); },
      {"cannot create the report directory", (temp.path("file") / "reports").string(),
       "Write the reports to a directory you can write to"});
  expect_input_error([&] { write_reports(passing_result(), temp.path("file")); },
                     {temp.path("file").string(), "Not a directory"});
}

TEST(WriteReports, AFileThatCannotBeReplacedLeavesNoTemporaryFile) {
  // report.html is a directory that is not empty: removing the old report fails (before any
  // new file is written), for root too.
  TempDir temp;
  fs::create_directories(temp.path(kHtmlFile) / "inside");
  expect_input_error([&] { write_reports(passing_result(), temp.path()); },
                     {"cannot remove the old report", temp.path(kHtmlFile).string(),
                      "fix this one's permissions"});
  EXPECT_EQ(names_in(temp.path()), std::vector<std::string>{kHtmlFile});
}

// Sets $GITHUB_STEP_SUMMARY for one test and restores it after.
class ReportGithubStepSummary : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* value = getenv("GITHUB_STEP_SUMMARY")) saved_ = value;
    setenv("GITHUB_STEP_SUMMARY", summary_.string().c_str(), 1);
  }
  void TearDown() override {
    if (saved_) {
      setenv("GITHUB_STEP_SUMMARY", saved_->c_str(), 1);
    } else {
      unsetenv("GITHUB_STEP_SUMMARY");
    }
  }

  TempDir temp_;
  fs::path summary_ = temp_.path("step_summary.md");
  std::optional<std::string> saved_;
};

TEST_F(ReportGithubStepSummary, AppendsTheReportAfterEarlierContent) {
  write_bytes(summary_, "# Build\n");
  const std::string markdown = render_markdown(failing_result());
  EXPECT_TRUE(append_github_step_summary(markdown));
  EXPECT_EQ(read_bytes(summary_), "# Build\n\n" + markdown);
}

TEST_F(ReportGithubStepSummary, DoesNothingWhenUnset) {
  unsetenv("GITHUB_STEP_SUMMARY");
  EXPECT_FALSE(append_github_step_summary("# report\n"));
  setenv("GITHUB_STEP_SUMMARY", "", 1);
  EXPECT_FALSE(append_github_step_summary("# report\n"));
  EXPECT_FALSE(fs::exists(summary_));
}

TEST_F(ReportGithubStepSummary, CutsAReportThatWouldPassOneMebibyte) {
  write_bytes(summary_, std::string(100'000, 'x') + "\n");
  // A long report: a folded section that the cut leaves open, then many table rows.
  std::string markdown = "## report\n\n<details><summary>details</summary>\n\n";
  for (int row = 0; markdown.size() < 2 * kGithubStepSummaryMaxBytes; ++row) {
    markdown += "| row " + std::to_string(row) + " | Δ value |\n";
  }
  EXPECT_TRUE(append_github_step_summary(markdown, "out/report.html"));
  const std::string summary = read_bytes(summary_);
  EXPECT_LE(summary.size(), kGithubStepSummaryMaxBytes);
  EXPECT_GT(summary.size(), kGithubStepSummaryMaxBytes - 200);
  EXPECT_NE(summary.find("cut at GitHub's 1 MiB limit"), std::string::npos);
  EXPECT_NE(summary.find("out/report.html"), std::string::npos);
  EXPECT_NE(summary.find("|\n</details>\n\n---"), std::string::npos);  // cut after a whole row
}

TEST_F(ReportGithubStepSummary, AppendsNothingToAFullSummary) {
  write_bytes(summary_, std::string(kGithubStepSummaryMaxBytes - 10, 'x'));
  EXPECT_FALSE(append_github_step_summary(render_markdown(passing_result())));
  EXPECT_EQ(fs::file_size(summary_), kGithubStepSummaryMaxBytes - 10);
}

TEST_F(ReportGithubStepSummary, UnwritableSummaryIsAnInputError) {
  setenv("GITHUB_STEP_SUMMARY", temp_.path().string().c_str(), 1);  // a directory
  expect_input_error([] { append_github_step_summary("# report\n"); },
                     {"$GITHUB_STEP_SUMMARY", "Point GITHUB_STEP_SUMMARY to a writable file"});
}

}  // namespace
}  // namespace parity::reports
