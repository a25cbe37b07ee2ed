// The catalogue report: one page over every scenario case of the source documents that
// `parity cases run` ran (docs/pitfalls.md: S1-S11, P1-P14), a row per case with what the
// document claims, the verdict on the claim, what parity observed and expected, and whether the
// two agree.
//
//   catalogue/index.html      self-contained (no network, no script), like report.html
//   catalogue/catalogue.md    the same table in GitHub-flavoured Markdown (a CI job summary)
//   catalogue/catalogue.json  {"schema": "parity-catalogue", "schema_version": 2, "entries": [...]}
//
// A case that made no comparison report (an error or a probe case) gets a page of its own,
// CASE/report/report.html (render_case_page): the claim, the verdict, what the run observed and
// every figure it computed.
//
// Every string is escaped for the format it lands in (reports.h).
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace parity::reports {

inline constexpr int kCatalogueSchemaVersion = 2;
inline constexpr const char* kCatalogueHtmlFile = "index.html";
inline constexpr const char* kCatalogueMarkdownFile = "catalogue.md";
inline constexpr const char* kCatalogueJsonFile = "catalogue.json";

// How a case's observed outcome relates to its expectation.
enum class CaseOutcome {
  kAsExpected,    // what the case expects happened (an expected failure included)
  kDiffers,       // something else happened: the catalogue fails
  kNotSupported,  // the case needs an engine feature not built yet; it says which
};

// "as expected", "differs", "not yet supported".
const char* to_string(CaseOutcome outcome);

// The verdict shown when the run did not behave as the case expects: the case's verdict rests
// on that expectation, so it is not claimed.
inline constexpr const char* kUnsettledVerdict = "unsettled";

struct CatalogueEntry {
  std::string id;          // "P2", "S6", ...
  std::string title;       // the topic, neutral: "psum instead of pmean"
  std::string case_name;   // the case file's name, e.g. "p2-psum-not-pmean"
  std::string source;      // "000 §4.3, §7"
  std::string claim;       // what the document claims
  // The verdict on the claim: confirmed, refuted, partly, not reproducible here, not checkable
  // here; kUnsettledVerdict when the outcome differs, "not checked" for a case not supported.
  std::string verdict;
  std::string expected;    // "not equivalent; diagnosis P2", "error: unbound axis name", ...
  std::string observed;    // what the run showed, one or two sentences
  std::string summary;     // what the run showed, in one line (parity cases run prints it)
  std::string fact_check;  // why the verdict holds, its numbers filled from the run
  // Every figure the run computed, (name, value as printed), in the order computed.
  std::vector<std::pair<std::string, std::string>> figures;
  CaseOutcome outcome = CaseOutcome::kAsExpected;
  // The case's own report.html, relative to the catalogue folder; empty when the case made none
  // (an expected error, a case not supported yet).
  std::string report_link;
};

std::string render_catalogue_html(const std::vector<CatalogueEntry>& entries);
std::string render_catalogue_markdown(const std::vector<CatalogueEntry>& entries);
std::string render_catalogue_json(const std::vector<CatalogueEntry>& entries);
// The page of one case that made no comparison report; `case_toml` is shown at its foot.
std::string render_case_page(const CatalogueEntry& entry, const std::string& case_toml);

// Writes the three files into `dir` (created if missing), each replaced atomically. Throws
// parity::InputError naming the path when `dir` cannot be written.
void write_catalogue_report(const std::vector<CatalogueEntry>& entries,
                            const std::filesystem::path& dir);
// Writes render_case_page's page as dir/report.html (kHtmlFile), replaced atomically.
void write_case_page(const CatalogueEntry& entry, const std::string& case_toml,
                     const std::filesystem::path& dir);

}  // namespace parity::reports
