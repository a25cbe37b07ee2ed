// Reports of a comparison: what a person reads (report.html with inline SVG charts, a terminal
// summary), what CI shows (report.md as a job summary, junit.xml) and what tools read
// (report.json). Every renderer is a pure function of the ComparisonResult; write_reports puts
// the four files in a directory.
//
// Every string that came from input (run directories, case files, check details) is escaped for
// the format it lands in, and characters that the format cannot carry at all (control
// characters, invalid UTF-8) are replaced by a visible stand-in ("\x01", U+FFFD).
#pragma once

#include <filesystem>
#include <string>

#include "parity/compare/result.h"

namespace parity::reports {

// File names inside the report directory.
inline constexpr const char* kHtmlFile = "report.html";
inline constexpr const char* kMarkdownFile = "report.md";
inline constexpr const char* kJsonFile = "report.json";
inline constexpr const char* kJunitFile = "junit.xml";

// GitHub drops a step summary over 1 MiB whole ("upload aborted"), so
// append_github_step_summary keeps the file within this size.
inline constexpr size_t kGithubStepSummaryMaxBytes = 1024 * 1024;

// One self-contained HTML page (no network: CSS inline, charts as inline SVG, no script):
// verdict and diagnoses, the checks, step-by-step charts, the two runs' metadata.
std::string render_html(const compare::ComparisonResult& result);

// GitHub-flavoured Markdown for a CI job summary: verdict, diagnoses, checks, runs.
std::string render_markdown(const compare::ComparisonResult& result);

// Every field of the result as JSON: {"schema": "parity-report", "schema_version": N, ...}.
// Non-finite numbers are the strings "NaN", "Infinity", "-Infinity", as in run directories.
std::string render_json(const compare::ComparisonResult& result);

// JUnit XML: one <testsuite name="parity compare"> with a <testcase> per check; failed checks
// carry a <failure>, checks neither run recorded a <skipped>.
std::string render_junit(const compare::ComparisonResult& result);

// A compact table for the terminal: verdict and headline, one line per check (status and its
// summary sentence, cut to one line), one line per diagnosis. `color` adds ANSI colours to the
// status words.
std::string render_terminal_summary(const compare::ComparisonResult& result, bool color);

// Renders the four reports and writes them into `dir` (created if missing), each file replaced
// atomically (temp file + rename): a reader sees the old file or the new one, never half of one.
// All or nothing: when one cannot be written, none of the four is left in `dir`, old or new,
// so a CI that reads junit.xml never takes a previous run's verdict for this one. Throws
// parity::InputError naming the path when `dir` cannot be created or written.
void write_reports(const compare::ComparisonResult& result, const std::filesystem::path& dir);

// Removes the four reports from `dir` (those that exist), before a rerun whose results will
// replace them: while the rerun trains, and when it is stopped, no old verdict stays beside the
// new runs. Throws parity::InputError naming the file when one cannot be removed.
void remove_reports(const std::filesystem::path& dir);

// Before a comparison that will write its reports into `dir` (named by `option`, "--report"):
// refuses (InputError, parity::check_output_file's rules) a report there that is a symbolic
// link, and any report there at all unless `overwrite`.
void check_report_files(const std::filesystem::path& dir, const std::string& option,
                        bool overwrite);

// When $GITHUB_STEP_SUMMARY names a file, appends `markdown` (report.md) to it and returns true;
// returns false when the variable is unset or empty. The file is kept within
// kGithubStepSummaryMaxBytes: a report that does not fit is cut at a line boundary and ends with
// a note pointing to `html_report`. Throws parity::InputError when the file cannot be written.
bool append_github_step_summary(const std::string& markdown,
                                const std::filesystem::path& html_report = kHtmlFile);

}  // namespace parity::reports
