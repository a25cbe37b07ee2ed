// The catalogue's index.html: one self-contained page in report.html's style. The verdict first
// (a badge, a headline naming the cases that differ, a pill per outcome), then one table row per
// case, in the catalogue's order, with a link to the case's own report.html under its outcome. A
// case that differs is tinted red so that it stands out in a long table. Like report.html, the
// markup is also well-formed XML.
#include <fmt/format.h>

#include "catalogue_content.h"
#include "escape.h"
#include "html_parts.h"
#include "html_style.h"
#include "parity/reports/catalogue.h"

namespace parity::reports {
namespace {

using compare::CheckStatus;

std::string e(const std::string& text) { return markup_escape(text); }

std::string verdict_chip(const std::string& verdict) {
  return fmt::format("<span class=\"claim-verdict {}\">{}</span>",
                     markup_attribute_escape(verdict_class(verdict)), e(verdict));
}

std::string verdict_html(const std::vector<CatalogueEntry>& entries) {
  const CheckStatus tone = catalogue_passes(entries) ? CheckStatus::kPass : CheckStatus::kFail;
  std::string out = fmt::format(
      "<header class=\"verdict {}\"><div class=\"kicker\">parity catalogue · the scenario cases "
      "of the source documents</div><div class=\"badge\"><span class=\"mark\">{}</span>{}</div>"
      "<h1>{}</h1><p class=\"verdict-tally\">Verdicts on the documents' claims: {}</p>"
      "<ul class=\"tally\">",
      status_tone(tone), status_mark(tone), catalogue_banner(entries),
      e(catalogue_headline(entries)), e(verdict_tally(entries)));
  for (const OutcomeCount& count : outcome_counts(entries)) {
    out += "<li>" +
           status_pill(outcome_as_status(count.outcome),
                       fmt::format("{} {}", count.count, to_string(count.outcome))) +
           "</li>";
  }
  return out + "</ul></header>";
}

// A cell of prose; on a phone its column heading is written above it (data-label).
std::string prose_cell(const char* label, const std::string& text) {
  if (text.empty()) {
    return fmt::format("<td class=\"prose\" data-label=\"{}\"><span class=\"muted\">–</span></td>",
                       label);
  }
  return fmt::format("<td class=\"prose\" data-label=\"{}\">{}</td>", label, e(text));
}

// The link to the case's own report, under the outcome; "" when the case made none.
std::string report_html(const CatalogueEntry& entry) {
  if (entry.report_link.empty()) return "";
  const std::optional<std::string> link = safe_report_link(entry.report_link);
  if (!link) {
    return fmt::format("<span class=\"case-report refused\" title=\"{}\">{}</span>",
                       kRefusedLinkReason, kRefusedLinkNote);
  }
  return fmt::format("<a class=\"case-report\" href=\"{}\">report</a>",
                     markup_attribute_escape(*link));
}

const char* row_class(CaseOutcome outcome) {
  switch (outcome) {
    case CaseOutcome::kAsExpected:
      return "case-as-expected";
    case CaseOutcome::kDiffers:
      return "case-differs";
    case CaseOutcome::kNotSupported:
      return "case-not-supported";
  }
  return "";
}

std::string row_html(const CatalogueEntry& entry) {
  std::string row = fmt::format(
      "<tr class=\"{}\"><td class=\"case-id\">{}</td><td class=\"case-title\"><strong>{}</strong>"
      "<span class=\"case-meta\"><code>{}</code> · {}</span></td>",
      row_class(entry.outcome), e(entry.id), e(entry.title), e(entry.case_name), e(entry.source));
  row += prose_cell("claim", entry.claim);
  row += fmt::format("<td class=\"case-verdict\" data-label=\"verdict\">{}</td>",
                     verdict_chip(entry.verdict));
  row += prose_cell("observed", entry.observed);
  row += prose_cell("fact check", entry.fact_check);
  row += prose_cell("expected", entry.expected);
  return row + fmt::format("<td class=\"case-outcome\">{}{}</td></tr>",
                           status_pill(outcome_as_status(entry.outcome), to_string(entry.outcome)),
                           report_html(entry));
}

std::string table_html(const std::vector<CatalogueEntry>& entries) {
  std::string out = "<section><h2>Cases</h2>";
  if (entries.empty()) return out + "<p class=\"muted\">No scenario case was run.</p></section>";
  out += "<div class=\"card scroll\"><table class=\"catalogue\"><thead><tr>";
  for (const std::string& column : catalogue_columns()) out += "<th>" + e(column) + "</th>";
  out += "</tr></thead><tbody>";
  for (const CatalogueEntry& entry : entries) out += row_html(entry);
  return out + "</tbody></table></div></section>";
}

}  // namespace

std::string render_catalogue_html(const std::vector<CatalogueEntry>& entries) {
  std::string page = page_start(fmt::format("parity catalogue: {}",
                                            catalogue_passes(entries) ? "passes" : "fails"),
                                kCatalogueCss) +
                     "<main class=\"catalogue\">";
  page += verdict_html(entries);
  page += table_html(entries);
  page += fmt::format(
      "<footer>parity catalogue schema {} · each case's own report is linked from its row · this "
      "page loads nothing from the network.</footer></main></body></html>\n",
      kCatalogueSchemaVersion);
  return page;
}

}  // namespace parity::reports
