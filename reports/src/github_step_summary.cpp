// GitHub Actions job summaries: each step may append Markdown to the file named by
// $GITHUB_STEP_SUMMARY, and GitHub drops a step's whole summary when that file passes 1 MiB
// ("upload aborted, supports content up to a size of 1024k"). A report too long for what is left
// is therefore cut at a line boundary (never inside a UTF-8 character or a table row), an open
// <details> is closed, and a note points to the full report.
#include <cstdlib>
#include <fstream>
#include <system_error>

#include "escape.h"
#include "parity/common/error.h"
#include "parity/reports/reports.h"

namespace parity::reports {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFix =
    ". Point GITHUB_STEP_SUMMARY to a writable file, or unset it outside GitHub Actions.";

size_t count(const std::string& text, const std::string& what) {
  size_t found = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++found;
  return found;
}

// `markdown`, or as much of it as fits in `budget` bytes with the note; "" when not even the
// note fits.
std::string fit_to_budget(const std::string& markdown, size_t budget, const fs::path& html_report) {
  if (markdown.size() <= budget) return markdown;
  const std::string note =
      "\n---\n\n**This summary was cut at GitHub's 1 MiB limit.** The full "
      "report, with charts, is " +
      markdown_escape(html_report.string()) + ".\n";
  const std::string close_details = "</details>\n";
  const size_t reserved = note.size() + close_details.size();
  if (budget < reserved) return "";
  const size_t last_newline = markdown.rfind('\n', budget - reserved);
  std::string kept = last_newline == std::string::npos ? "" : markdown.substr(0, last_newline + 1);
  if (count(kept, "<details>") > count(kept, "</details>")) kept += close_details;
  return kept + note;
}

}  // namespace

bool append_github_step_summary(const std::string& markdown, const fs::path& html_report) {
  const char* variable = std::getenv("GITHUB_STEP_SUMMARY");
  if (variable == nullptr || *variable == '\0') return false;
  const fs::path path = variable;
  std::error_code error;
  const uintmax_t existing = fs::exists(path, error) ? fs::file_size(path, error) : 0;
  if (error) {
    throw InputError("cannot read the size of $GITHUB_STEP_SUMMARY " + path.string() + ": " +
                     error.message() + kFix);
  }
  // Summaries of earlier commands in the step stay; ours starts on a line of its own.
  const std::string separator = existing > 0 ? "\n" : "";
  const size_t used = static_cast<size_t>(existing) + separator.size();
  if (used >= kGithubStepSummaryMaxBytes) return false;
  const std::string text = fit_to_budget(markdown, kGithubStepSummaryMaxBytes - used, html_report);
  if (text.empty()) return false;
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << separator << text;
  out.close();
  if (!out) {
    throw InputError("cannot append to $GITHUB_STEP_SUMMARY " + path.string() + kFix);
  }
  return true;
}

}  // namespace parity::reports
