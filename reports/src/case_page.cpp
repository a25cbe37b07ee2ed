// The page of a scenario case that made no comparison report (an expected error, a probe):
// CASE/report/report.html, linked from the catalogue's row like a training case's report. The
// outcome first (a badge in the catalogue's tones), the topic, the verdict on the claim, then
// the claim, what the run observed, the fact-check and the expectation, every figure the run
// computed, and the case file itself. Self-contained and well-formed XML, like report.html.
#include <fmt/format.h>

#include "atomic_write.h"
#include "catalogue_content.h"
#include "escape.h"
#include "html_parts.h"
#include "html_style.h"
#include "parity/reports/catalogue.h"
#include "parity/reports/reports.h"

namespace parity::reports {
namespace {

std::string e(const std::string& text) { return markup_escape(text); }

std::string fact(const char* term, const std::string& text) {
  return fmt::format("<dt>{}</dt><dd>{}</dd>", term,
                     text.empty() ? "<span class=\"muted\">–</span>" : e(text));
}

std::string figures_table(const CatalogueEntry& entry) {
  std::string out = "<section><h2>What the run computed</h2>";
  if (entry.figures.empty()) {
    return out + "<p class=\"muted\">The run computed no figures.</p></section>";
  }
  out += "<div class=\"card scroll\"><table><thead><tr><th>figure</th><th>value</th></tr></thead>"
         "<tbody>";
  for (const auto& [name, value] : entry.figures) {
    out += fmt::format("<tr><td class=\"figure-name\"><code>{}</code></td><td>{}</td></tr>",
                       e(name), e(value));
  }
  return out + "</tbody></table></div></section>";
}

}  // namespace

std::string render_case_page(const CatalogueEntry& entry, const std::string& case_toml) {
  const compare::CheckStatus tone = outcome_as_status(entry.outcome);
  std::string page = page_start(fmt::format("parity case {}: {}", e(entry.id), e(entry.title)),
                                kCatalogueCss) +
                     "<main class=\"catalogue\">";
  page += fmt::format(
      "<header class=\"verdict {}\"><div class=\"kicker\">parity case · {} · <code>{}</code> · "
      "{}</div><div class=\"badge\"><span class=\"mark\">{}</span>{}</div><h1>{}</h1>"
      "<p>Verdict on the claim: <span class=\"claim-verdict {}\">{}</span></p></header>",
      status_tone(tone), e(entry.id), e(entry.case_name), e(entry.source), status_mark(tone),
      e(to_string(entry.outcome)), e(entry.title),
      markup_attribute_escape(verdict_class(entry.verdict)), e(entry.verdict));
  page += "<section><div class=\"card\"><dl class=\"case-facts\">";
  page += fact("claim", entry.claim);
  page += fact("observed", entry.observed);
  page += fact("fact check", entry.fact_check);
  page += fact("expected", entry.expected);
  page += "</dl></div></section>";
  page += figures_table(entry);
  page += fmt::format("<section><h2>The case file</h2><pre class=\"card case-toml\">{}</pre>"
                      "</section>",
                      e(case_toml));
  page += "<footer>parity case page · the catalogue links it from the case's row · this page "
          "loads nothing from the network.</footer></main></body></html>\n";
  return page;
}

void write_case_page(const CatalogueEntry& entry, const std::string& case_toml,
                     const std::filesystem::path& dir) {
  write_report_files(dir, {{kHtmlFile, render_case_page(entry, case_toml)}});
}

}  // namespace parity::reports
