// One scenario case of the catalogue (a case with a [scenario]: docs/pitfalls.md's S and P
// items) run and judged against what the case expects.
#pragma once

#include <filesystem>

#include "parity/common/case_spec.h"
#include "parity/compare/compare.h"
#include "parity/reports/catalogue.h"

namespace parity::cli {

// "equivalent", "not equivalent; diagnosis P2", "error containing \"unbound axis name\"",
// "the engine behaves as JAX does (probe-...)", "not yet supported (missing: ...)".
std::string expected_outcome(const CaseSpec& spec);
// The part of the error text an error case expects under the case's JAX release
// (scenario.expect_error_by_release, else scenario.expect_error).
std::string expected_error(const CaseSpec& spec);

// Runs the case under `dir` the way its expectation needs (the main job and its reports in
// dir/report; the error program; nothing for a case not supported yet) and fills the catalogue
// entry, with report_link relative to a catalogue folder beside `dir`.
reports::CatalogueEntry run_scenario(const CaseSpec& spec, const std::filesystem::path& dir,
                                     const compare::CompareOptions& options);

}  // namespace parity::cli
