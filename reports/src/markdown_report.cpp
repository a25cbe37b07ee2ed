// report.md: GitHub-flavoured Markdown for a CI job summary. The verdict and the diagnoses come
// first, then one table row per check; each check's figures, details and worst tensors fold
// away under <details>, so a summary stays short. Sections start at h3, as job summaries do.
#include <fmt/format.h>

#include <algorithm>

#include "escape.h"
#include "markdown_parts.h"
#include "number_format.h"
#include "parity/reports/reports.h"
#include "report_content.h"
#include "report_limits.h"

namespace parity::reports {
namespace {

using compare::Check;
using compare::CheckStatus;
using compare::ComparisonResult;
using compare::Verdict;

std::string md(const std::string& text) { return markdown_escape(text); }

const char* verdict_icon(Verdict verdict) {
  switch (verdict) {
    case Verdict::kEquivalent:
      return "✅";
    case Verdict::kNotEquivalent:
      return "❌";
    case Verdict::kIncomplete:
    case Verdict::kInconclusive:
      return "⚠️";
  }
  return "❔";
}

std::string verdict_markdown(const ComparisonResult& result) {
  std::string tally;
  for (const auto& [status, count] : status_tally(result.checks)) {
    tally += fmt::format("{}{} {}", tally.empty() ? "" : ", ", count, compare::to_string(status));
  }
  return fmt::format(
      "## {} parity: {}\n\n**{}**\n\nCase {} · run {} ({}) against run {} ({}, reference) · {} "
      "· checks: {}\n\n",
      verdict_icon(result.verdict), compare::to_string(result.verdict), md(result.headline),
      md(result.a.case_name), md(result.a.label), md(result.a.producer), md(result.b.label),
      md(result.b.producer), md(compared_text(result)), tally.empty() ? "none" : tally);
}

std::string diagnoses_markdown(const ComparisonResult& result) {
  if (result.diagnoses.empty()) return "";
  std::string out = "### Diagnosis\n\n";
  for (const compare::Diagnosis& diagnosis : result.diagnoses) {
    out += fmt::format("- **{} · {}.** {}<br>**Fix:** {}\n", md(diagnosis.pitfall),
                       md(diagnosis.title), md(diagnosis.evidence), md(diagnosis.fix));
  }
  return out + "\n";
}

std::string more_line(size_t shown, size_t total, const char* what) {
  if (total <= shown) return "";
  return fmt::format("{} more {} in report.json.\n\n", total - shown, what);
}

// A check's figures, details and worst tensors, folded under <details>; "" when it has none.
std::string check_details_markdown(const Check& check) {
  if (check.figures.empty() && check.details.empty() && check.tensors.empty()) return "";
  // The blank line after <summary> makes GitHub read what follows as Markdown again.
  std::string out = fmt::format("<details><summary>{}: {}</summary>\n\n",
                                markup_escape(check.title), compare::to_string(check.status));
  if (!check.figures.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const compare::Figure& figure : check.figures) {
      rows.push_back({md(figure_label(figure.name)), md(format_figure_value(figure))});
    }
    out += markdown_table({"figure", "value"}, rows);
  }
  const size_t details_shown = std::min(check.details.size(), kMaxListedDetails);
  for (size_t i = 0; i < details_shown; ++i) out += "- " + md(check.details[i]) + "\n";
  if (details_shown > 0) out += "\n" + more_line(details_shown, check.details.size(), "lines");
  if (!check.tensors.empty()) {
    std::vector<std::string> header;
    for (const std::string& column : tensor_columns()) header.push_back(md(column));
    const size_t shown = std::min(check.tensors.size(), kMaxListedTensors);
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < shown; ++i) {
      std::vector<std::string> cells;
      for (const std::string& cell : tensor_cells(check.tensors[i])) cells.push_back(md(cell));
      rows.push_back(cells);
    }
    out += markdown_table(header, rows) + more_line(shown, check.tensors.size(), "tensors");
  }
  return out + "</details>\n\n";
}

std::string checks_markdown(const ComparisonResult& result) {
  if (result.checks.empty()) return "### Checks\n\nNo check was run.\n\n";
  std::vector<std::vector<std::string>> rows;
  std::string details;
  for (const Check& check : result.checks) {
    rows.push_back(
        {fmt::format("{} {}", status_icon(check.status), compare::to_string(check.status)),
         md(check.title), md(check.summary),
         check.first_failing_step ? std::to_string(*check.first_failing_step) : "–"});
    details += check_details_markdown(check);
  }
  return "### Checks\n\n" +
         markdown_table({"status", "check", "result", "first failing step"}, rows) + details;
}

std::string rows_markdown(const std::vector<RunRow>& rows, const std::vector<std::string>& header) {
  std::vector<std::vector<std::string>> cells;
  for (const RunRow& row : rows) {
    // A difference that should not be there is marked, as the HTML report highlights it.
    const bool differs = row.should_match && row.a != row.b;
    cells.push_back({md(row.name) + (differs ? " ⚠️" : ""), md(row.a), md(row.b)});
  }
  return markdown_table(header, cells);
}

std::string runs_markdown(const ComparisonResult& result) {
  std::string out =
      "### Runs\n\n" + rows_markdown(run_rows(result.a, result.b),
                                     {"", "run " + md(result.a.label) + " (under test)",
                                      "run " + md(result.b.label) + " (reference)"});
  const std::vector<RunRow> versions = version_rows(result.a, result.b);
  if (!versions.empty()) {
    out += "### Versions\n\n" + rows_markdown(versions, {"component", "run " + md(result.a.label),
                                                         "run " + md(result.b.label)});
  }
  return out;
}

}  // namespace

std::string render_markdown(const ComparisonResult& result) {
  std::string out = verdict_markdown(result);
  out += diagnoses_markdown(result);
  out += checks_markdown(result);
  out += runs_markdown(result);
  if (result.seed_distributions.empty()) {
    out += fmt::format(
        "### Tolerances\n\n- loss: {} ({})\n- gradients and parameters: {} ({})\n\n",
        tolerance_text(result.loss_tolerance), md(result.loss_tolerance.source),
        tolerance_text(result.tensor_tolerance), md(result.tensor_tolerance.source));
  } else {
    out += "### Over seeds\n\n";
    for (const std::string& line : seed_distribution_lines(result)) out += "- " + md(line) + "\n";
    out += "\n";
  }
  out += fmt::format("<sub>parity {} · report schema {} · generated {} · charts in {}</sub>\n",
                     md(result.parity_version), result.schema_version, md(result.generated_at),
                     kHtmlFile);
  return out;
}

}  // namespace parity::reports
