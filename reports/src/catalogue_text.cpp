// The catalogue for CI and tools.
//
// catalogue.md: GitHub-flavoured Markdown for a job summary: the banner as a heading, the
// headline, the counts, then the table of index.html, a row per case (a case that differs has
// its id in bold, the report link is under the outcome). Every cell is escaped with
// markdown_escape, so no '|' or line break in a document's text splits a row.
//
// catalogue.json: every field of every entry, for tools:
//   {"schema": "parity-catalogue", "schema_version": 1, "verdict": "passes" | "fails",
//    "counts": {"as expected": n, "differs": n, "not yet supported": n, "total": n},
//    "entries": [{"id", "title", "case", "source", "claim", "expected", "observed",
//                 "fact_check", "outcome", "report"}]}
// Outcomes are the words of to_string(CaseOutcome), so counts[entry.outcome] works. Strings are
// written as given except that invalid UTF-8 (which JSON cannot carry) is replaced, as in
// report.json; "report" is null when the case made no report.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "catalogue_content.h"
#include "escape.h"
#include "markdown_parts.h"
#include "parity/reports/catalogue.h"

namespace parity::reports {
namespace {

using Json = nlohmann::ordered_json;  // keeps keys in the order written, for people reading

std::string md(const std::string& text) { return markdown_escape(text); }

std::string outcome_markdown(CaseOutcome outcome) {
  return fmt::format("{} {}", status_icon(outcome_as_status(outcome)), to_string(outcome));
}

// The link to the case's own report, on a line of its own under the outcome; "" when the case
// made none.
std::string report_markdown(const std::string& report_link) {
  if (report_link.empty()) return "";
  const std::optional<std::string> link = safe_report_link(report_link);
  if (!link) return fmt::format("<br>{} ({})", kRefusedLinkNote, kRefusedLinkReason);
  return fmt::format("<br>[report]({})", *link);
}

std::string or_dash(const std::string& text) { return text.empty() ? "–" : md(text); }

Json figures_json(const std::vector<std::pair<std::string, std::string>>& figures) {
  Json object = Json::object();
  for (const auto& [name, value] : figures) object[utf8_repair(name)] = utf8_repair(value);
  return object;
}

std::vector<std::string> row_markdown(const CatalogueEntry& entry) {
  const bool differs = entry.outcome == CaseOutcome::kDiffers;
  // As in index.html, the case file's name and the source go under the title (<sub>, with
  // escaped text like every cell).
  return {differs ? "**" + md(entry.id) + "**" : md(entry.id),
          fmt::format("{}<br><sub>{} · {}</sub>", md(entry.title), md(entry.case_name),
                      md(entry.source)),
          or_dash(entry.claim),
          or_dash(entry.verdict),
          or_dash(entry.observed),
          or_dash(entry.fact_check),
          or_dash(entry.expected),
          outcome_markdown(entry.outcome) + report_markdown(entry.report_link)};
}

}  // namespace

std::string render_catalogue_markdown(const std::vector<CatalogueEntry>& entries) {
  const bool passes = catalogue_passes(entries);
  std::string counts;
  for (const OutcomeCount& count : outcome_counts(entries)) {
    counts += fmt::format("{}{} {} {}", counts.empty() ? "" : " · ",
                          status_icon(outcome_as_status(count.outcome)), count.count,
                          to_string(count.outcome));
  }
  std::string out =
      fmt::format("## {} {}\n\n**{}**\n\n{}\n\nVerdicts on the documents' claims: {}\n\n",
                  status_icon(passes ? compare::CheckStatus::kPass : compare::CheckStatus::kFail),
                  catalogue_banner(entries), md(catalogue_headline(entries)), counts,
                  md(verdict_tally(entries)));
  if (entries.empty()) {
    out += "No scenario case was run.\n\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const CatalogueEntry& entry : entries) rows.push_back(row_markdown(entry));
    out += markdown_table(catalogue_columns(), rows);
  }
  return out + fmt::format("<sub>parity catalogue schema {} · the same table in {}</sub>\n",
                           kCatalogueSchemaVersion, kCatalogueHtmlFile);
}

std::string render_catalogue_json(const std::vector<CatalogueEntry>& entries) {
  Json counts = Json::object();
  for (const OutcomeCount& count : outcome_counts(entries)) {
    counts[to_string(count.outcome)] = count.count;
  }
  counts["total"] = entries.size();
  Json list = Json::array();
  for (const CatalogueEntry& entry : entries) {
    list.push_back({{"id", utf8_repair(entry.id)},
                    {"title", utf8_repair(entry.title)},
                    {"case", utf8_repair(entry.case_name)},
                    {"source", utf8_repair(entry.source)},
                    {"claim", utf8_repair(entry.claim)},
                    {"verdict", utf8_repair(entry.verdict)},
                    {"expected", utf8_repair(entry.expected)},
                    {"observed", utf8_repair(entry.observed)},
                    {"summary", utf8_repair(entry.summary)},
                    {"fact_check", utf8_repair(entry.fact_check)},
                    {"figures", figures_json(entry.figures)},
                    {"outcome", to_string(entry.outcome)},
                    {"report", entry.report_link.empty() ? Json(nullptr)
                                                         : Json(utf8_repair(entry.report_link))}});
  }
  Json catalogue;
  catalogue["schema"] = "parity-catalogue";
  catalogue["schema_version"] = kCatalogueSchemaVersion;
  catalogue["verdict"] = catalogue_passes(entries) ? "passes" : "fails";
  catalogue["counts"] = counts;
  catalogue["entries"] = list;
  return catalogue.dump(2) + "\n";
}

}  // namespace parity::reports
