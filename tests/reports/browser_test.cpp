// report.html in a real browser: headless Chromium loads the page from disk, renders it without
// console errors, and takes a screenshot (kept as build dir/report-screenshot.png for a person
// to look at). Chromium is a test dependency: when it is missing the test fails and says how to
// install it, rather than skip and pass unnoticed.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "command.h"
#include "parity/reports/reports.h"
#include "sample_results.h"
#include "test_files.h"

namespace parity::reports {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_command;
using testing::shell_quote;
using testing::TempDir;

// Lines of Chromium's log that report a page problem: a console line ("INFO:CONSOLE:1]", or
// "CONSOLE(1)" in older versions; at --v=0 Chromium 156 logs uncaught exceptions there, plain
// console.error only from --v=1), a blocked or failed load.
std::vector<std::string> page_errors(const std::string& log) {
  std::vector<std::string> errors;
  const std::regex problem("Uncaught|CONSOLE[(:]|Refused to|net::ERR_");
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, problem)) errors.push_back(line);
  }
  return errors;
}

void screenshot(const compare::ComparisonResult& result, const std::string& name) {
  const CommandResult found = run_command("command -v chromium", 10);
  ASSERT_EQ(found.exit_code, 0)
      << "chromium is not installed; the browser test needs it. Run scripts/install-deps.sh "
         "(or apt-get install chromium).";
  TempDir temp;
  write_reports(result, temp.path());
  const fs::path png = temp.path("screenshot.png");
  // A fresh profile per run, so nothing of an earlier one (or of the user's) leaks in.
  const CommandResult run = run_command(
      "chromium --headless=new --no-sandbox --disable-gpu --no-first-run "
      "--user-data-dir=" +
          shell_quote(temp.path("profile").string()) +
          " --enable-logging=stderr --v=0 --hide-scrollbars --window-size=1200,2400"
          " --screenshot=" +
          shell_quote(png.string()) + " " + shell_quote("file://" + temp.path(kHtmlFile).string()),
      120);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto errors = page_errors(run.output);
  EXPECT_TRUE(errors.empty()) << "the page logged problems:\n" << run.output;
  ASSERT_TRUE(fs::exists(png)) << run.output;
  // A blank 1200x2400 PNG compresses to a few kB; a rendered report is far larger.
  EXPECT_GT(fs::file_size(png), 50'000u);
  fs::copy_file(png, fs::path(PARITY_BINARY_DIR) / name, fs::copy_options::overwrite_existing);
}

TEST(ReportBrowser, FailingReportRendersWithoutErrors) {
  screenshot(testing::failing_result(), "report-screenshot.png");
}

TEST(ReportBrowser, PassingReportRendersWithoutErrors) {
  screenshot(testing::passing_result(), "report-screenshot-passing.png");
}

}  // namespace
}  // namespace parity::reports
