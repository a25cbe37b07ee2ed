#include "scenario_run.h"

#include <fmt/format.h>

#include <algorithm>

#include "case_job.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"
#include "parity/reports/reports.h"
#include "scenario_programs.h"

namespace parity::cli {
namespace {

using reports::CaseOutcome;
using reports::CatalogueEntry;

std::vector<std::string> diagnosis_ids(const compare::ComparisonResult& result) {
  std::vector<std::string> ids;
  for (const compare::Diagnosis& diagnosis : result.diagnoses) ids.push_back(diagnosis.pitfall);
  return ids;
}

// Every expected id among the diagnoses, in the expected order.
bool diagnoses_match(const std::vector<std::string>& expected,
                     const std::vector<std::string>& found) {
  auto next = found.begin();
  for (const std::string& id : expected) {
    next = std::find(next, found.end(), id);
    if (next == found.end()) return false;
    ++next;
  }
  return true;
}

void judge_comparison(const CaseSpec& spec, const std::filesystem::path& dir,
                      const compare::CompareOptions& options, CatalogueEntry& entry) {
  const ScenarioSpec& scenario = spec.scenario;
  const auto job_folder = claim_job_folder(dir, "parity cases run " + scenario.id);
  const compare::ComparisonResult result = run_case_job(
      spec, dir, options, spec.compare.oracle, fmt::format("parity cases run {}", scenario.id));
  reports::write_reports(result, dir / "report");
  entry.report_link = fmt::format("../{}/report/{}", dir.filename().string(), reports::kHtmlFile);

  const std::vector<std::string> ids = diagnosis_ids(result);
  // "equivalent: A (...) and B (...) agree on all 10 steps compared." without the headline's
  // own "Equivalent: " repeating the verdict.
  std::string headline = result.headline;
  const std::string repeated = "Equivalent: ";
  if (headline.rfind(repeated, 0) == 0) headline.erase(0, repeated.size());
  entry.observed =
      fmt::format("{}{}: {}", compare::to_string(result.verdict),
                  ids.empty() ? "" : fmt::format("; diagnosis {}", fmt::join(ids, ", ")), headline);
  const bool verdict_matches = compare::to_string(result.verdict) == scenario.expect;
  entry.outcome = verdict_matches && diagnoses_match(scenario.expect_diagnoses, ids)
                      ? CaseOutcome::kAsExpected
                      : CaseOutcome::kDiffers;
}

void judge_error(const CaseSpec& spec, CatalogueEntry& entry) {
  if (find_engine_program(spec.scenario.engine_program).kind !=
      ProgramKind::kFailsBeforeTraining) {
    throw InputError(fmt::format(
        "{}: scenario.expect = \"error\" but engine program {} trains without one; name an "
        "error program ({})",
        spec.source_file.string(), spec.scenario.engine_program,
        engine_program_names_of_kind(ProgramKind::kFailsBeforeTraining)));
  }
  const std::optional<std::string> error = cases::run_error_program(spec);
  if (!error) {
    entry.observed = "the step ran without an error";
    entry.outcome = CaseOutcome::kDiffers;
    return;
  }
  entry.observed = "error: " + *error;
  entry.outcome = error->find(spec.scenario.expect_error) != std::string::npos
                      ? CaseOutcome::kAsExpected
                      : CaseOutcome::kDiffers;
}

void judge_probe(const CaseSpec& spec, CatalogueEntry& entry) {
  if (find_engine_program(spec.scenario.engine_program).kind != ProgramKind::kProbes) {
    throw InputError(fmt::format(
        "{}: scenario.expect = \"probe\" but engine program {} is not a probe; name one ({})",
        spec.source_file.string(), spec.scenario.engine_program,
        engine_program_names_of_kind(ProgramKind::kProbes)));
  }
  const cases::ProbeResult probe = cases::run_probe_program(spec);
  entry.observed = probe.observed;
  entry.outcome = probe.as_expected ? CaseOutcome::kAsExpected : CaseOutcome::kDiffers;
}

}  // namespace

std::string expected_outcome(const ScenarioSpec& scenario) {
  if (scenario.expect == "error") {
    return fmt::format("error containing \"{}\"", scenario.expect_error);
  }
  if (scenario.expect == "probe") {
    return fmt::format("the engine behaves as JAX does ({})", scenario.engine_program);
  }
  if (scenario.expect == "not supported") {
    return fmt::format("not yet supported (missing: {})", scenario.missing);
  }
  if (scenario.expect_diagnoses.empty()) return scenario.expect;
  return fmt::format("{}; diagnosis {}", scenario.expect,
                     fmt::join(scenario.expect_diagnoses, ", "));
}

reports::CatalogueEntry run_scenario(const CaseSpec& spec, const std::filesystem::path& dir,
                                     const compare::CompareOptions& options) {
  const ScenarioSpec& scenario = spec.scenario;
  CatalogueEntry entry;
  entry.id = scenario.id;
  entry.title = scenario.title;
  entry.case_name = spec.name;
  entry.source = scenario.source;
  entry.claim = scenario.claim;
  entry.fact_check = scenario.fact_check;
  entry.expected = expected_outcome(scenario);
  if (scenario.expect == "not supported") {
    entry.observed = "not run";
    entry.outcome = CaseOutcome::kNotSupported;
  } else if (scenario.expect == "error") {
    judge_error(spec, entry);
  } else if (scenario.expect == "probe") {
    judge_probe(spec, entry);
  } else {
    judge_comparison(spec, dir, options, entry);
  }
  return entry;
}

}  // namespace parity::cli
