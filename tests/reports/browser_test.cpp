// report.html and the catalogue's index.html in a real browser: headless Chromium loads the page
// from disk, renders it without console errors, and takes a screenshot (kept in the build dir as
// report-screenshot.png, catalogue-screenshot.png, ... for a person to look at). Chromium is a test
// dependency: when it is missing the test fails and says how to install it, rather than skip and
// pass unnoticed.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "command.h"
#include "parity/reports/catalogue.h"
#include "parity/reports/reports.h"
#include "sample_catalogue.h"
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

// Loads `page` (a file under `temp`) in a `width` x 2400 window, expects no page problems, and
// keeps the screenshot as build dir/`name`.
void screenshot_page(const TempDir& temp, const fs::path& page, const std::string& name,
                     int width = 1200) {
  const CommandResult found = run_command("command -v chromium", 10);
  ASSERT_EQ(found.exit_code, 0)
      << "chromium is not installed; the browser test needs it. Run scripts/install-deps.sh "
         "(or apt-get install chromium).";
  const fs::path png = temp.path("screenshot.png");
  // A fresh profile per run, so nothing of an earlier one (or of the user's) leaks in.
  const CommandResult run = run_command(
      "chromium --headless=new --no-sandbox --disable-gpu --no-first-run "
      "--user-data-dir=" +
          shell_quote(temp.path("profile").string()) +
          " --enable-logging=stderr --v=0 --hide-scrollbars --window-size=" +
          std::to_string(width) + ",2400 --screenshot=" + shell_quote(png.string()) + " " +
          shell_quote("file://" + page.string()),
      120);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto errors = page_errors(run.output);
  EXPECT_TRUE(errors.empty()) << "the page logged problems:\n" << run.output;
  ASSERT_TRUE(fs::exists(png)) << run.output;
  // A blank 1200x2400 PNG compresses to a few kB; a rendered page is far larger (narrower
  // windows in proportion).
  EXPECT_GT(fs::file_size(png), 50'000u * static_cast<uintmax_t>(width) / 1200);
  fs::copy_file(png, fs::path(PARITY_BINARY_DIR) / name, fs::copy_options::overwrite_existing);
}

void screenshot(const compare::ComparisonResult& result, const std::string& name) {
  TempDir temp;
  write_reports(result, temp.path());
  screenshot_page(temp, temp.path(kHtmlFile), name);
}

TEST(ReportBrowser, FailingReportRendersWithoutErrors) {
  screenshot(testing::failing_result(), "report-screenshot.png");
}

TEST(ReportBrowser, PassingReportRendersWithoutErrors) {
  screenshot(testing::passing_result(), "report-screenshot-passing.png");
}

TEST(ReportBrowser, CatalogueRendersWithoutErrors) {
  TempDir temp;
  write_catalogue_report(testing::sample_catalogue(), temp.path("catalogue"));
  screenshot_page(temp, temp.path("catalogue") / kCatalogueHtmlFile, "catalogue-screenshot.png");
}

TEST(ReportBrowser, CatalogueRendersOnAPhone) {
  // Below the phone breakpoint each case is a card.
  TempDir temp;
  write_catalogue_report(testing::sample_catalogue(), temp.path("catalogue"));
  screenshot_page(temp, temp.path("catalogue") / kCatalogueHtmlFile,
                  "catalogue-screenshot-phone.png", 390);
}

}  // namespace
}  // namespace parity::reports
