// The catalogue report: one page over every scenario case of the source documents that
// `parity cases run` ran (docs/pitfalls.md: S1-S11, P1-P14), a row per case with what the
// document claims, what parity expected, what it observed, and whether the two agree.
//
//   catalogue/index.html      self-contained (no network, no script), like report.html
//   catalogue/catalogue.md    the same table in GitHub-flavoured Markdown (a CI job summary)
//   catalogue/catalogue.json  {"schema": "parity-catalogue", "schema_version": 1, "entries": [...]}
//
// Every string is escaped for the format it lands in (reports.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace parity::reports {

inline constexpr int kCatalogueSchemaVersion = 1;
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

struct CatalogueEntry {
  std::string id;          // "P2", "S6", ...
  std::string title;       // "psum instead of pmean"
  std::string case_name;   // the case file's name, e.g. "p2-psum-not-pmean"
  std::string source;      // "000 §4.3, §7"
  std::string claim;       // what the document claims
  std::string expected;    // "not equivalent; diagnosis P2", "error: unbound axis name", ...
  std::string observed;    // what the run showed, one or two sentences
  std::string fact_check;  // the verdict on the document's claim ("confirmed: ...",
                           // "refuted: ...", "not reproducible here: ..."); may be empty
  CaseOutcome outcome = CaseOutcome::kAsExpected;
  // The case's own report.html, relative to the catalogue folder; empty when the case made none
  // (an expected error, a case not supported yet).
  std::string report_link;
};

std::string render_catalogue_html(const std::vector<CatalogueEntry>& entries);
std::string render_catalogue_markdown(const std::vector<CatalogueEntry>& entries);
std::string render_catalogue_json(const std::vector<CatalogueEntry>& entries);

// Writes the three files into `dir` (created if missing), each replaced atomically. Throws
// parity::InputError naming the path when `dir` cannot be written.
void write_catalogue_report(const std::vector<CatalogueEntry>& entries,
                            const std::filesystem::path& dir);

}  // namespace parity::reports
