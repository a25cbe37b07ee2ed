#include "scenario_run.h"

#include <fmt/format.h>

#include <algorithm>

#include "case_job.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"
#include "parity/engine_trainer/scenario_programs.h"
#include "parity/reports/reports.h"
#include "scenario_figures.h"

namespace parity::cli {
namespace {

using reports::CaseOutcome;
using reports::CatalogueEntry;

// What one way of running a case saw, before the case's figure conditions and fact-check.
struct Observation {
  bool as_expected = false;
  std::string observed;  // a sentence or two
  std::string summary;   // one line
  ObservedFigures figures;
};

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

// "not equivalent from step 0; diagnosis P2 (Gradients summed, not averaged)", "equivalent
// over 10 steps" (also when the loss check's failing steps were judged float noise).
std::string comparison_summary(const compare::ComparisonResult& result,
                               const ObservedFigures& figures) {
  std::string line = compare::to_string(result.verdict);
  const auto step = figures.number("first_failing_step");
  if (result.verdict != compare::Verdict::kEquivalent && step) {
    line += fmt::format(" from step {:.0f}", *step);
  } else if (const auto steps = figures.number("steps")) {
    line += fmt::format(" over {:.0f} steps", *steps);
  }
  std::vector<std::string> diagnoses;
  for (const compare::Diagnosis& diagnosis : result.diagnoses) {
    diagnoses.push_back(fmt::format("{} ({})", diagnosis.pitfall, diagnosis.title));
  }
  if (!diagnoses.empty()) line += fmt::format("; diagnosis {}", fmt::join(diagnoses, ", "));
  return line;
}

Observation observe_comparison(const CaseSpec& spec, const std::filesystem::path& dir,
                               const compare::CompareOptions& options, CatalogueEntry& entry) {
  const ScenarioSpec& scenario = spec.scenario;
  const auto job_folder = claim_job_folder(dir, "parity cases run " + scenario.id);
  const compare::ComparisonResult result = run_case_job(
      spec, dir, options, spec.compare.oracle, fmt::format("parity cases run {}", scenario.id));
  reports::write_reports(result, dir / "report");
  entry.report_link = fmt::format("../{}/report/{}", dir.filename().string(), reports::kHtmlFile);

  Observation observation;
  observation.figures = comparison_figures(result);
  const std::vector<std::string> ids = diagnosis_ids(result);
  // "equivalent: A (...) and B (...) agree on all 10 steps compared." without the headline's
  // own "Equivalent: " repeating the verdict.
  std::string headline = result.headline;
  const std::string repeated = "Equivalent: ";
  if (headline.rfind(repeated, 0) == 0) headline.erase(0, repeated.size());
  observation.observed =
      fmt::format("{}{}: {}", compare::to_string(result.verdict),
                  ids.empty() ? "" : fmt::format("; diagnosis {}", fmt::join(ids, ", ")), headline);
  observation.summary = comparison_summary(result, observation.figures);
  observation.as_expected = compare::to_string(result.verdict) == scenario.expect &&
                            diagnoses_match(scenario.expect_diagnoses, ids);
  return observation;
}

Observation observe_error(const CaseSpec& spec) {
  if (find_engine_program(spec.scenario.engine_program).kind !=
      ProgramKind::kFailsBeforeTraining) {
    throw InputError(fmt::format(
        "{}: scenario.expect = \"error\" but engine program {} trains without one; name an "
        "error program ({})",
        spec.source_file.string(), spec.scenario.engine_program,
        engine_program_names_of_kind(ProgramKind::kFailsBeforeTraining)));
  }
  Observation observation;
  const std::optional<std::string> error = engine_trainer::run_error_program(spec);
  observation.figures.set_text("error", error.value_or("none"));
  observation.figures.set_text("jax_error", engine_trainer::jax_quote(error.value_or("none")));
  observation.figures.merge(engine_trainer::error_program_figures(spec));
  if (!error) {
    observation.observed = observation.summary = "the step ran without an error";
    return observation;
  }
  observation.observed = "error: " + *error;
  observation.summary = "error: " + error->substr(0, error->find('\n'));
  observation.as_expected = error->find(expected_error(spec)) != std::string::npos;
  return observation;
}

Observation observe_probe(const CaseSpec& spec) {
  if (find_engine_program(spec.scenario.engine_program).kind != ProgramKind::kProbes) {
    throw InputError(fmt::format(
        "{}: scenario.expect = \"probe\" but engine program {} is not a probe; name one ({})",
        spec.source_file.string(), spec.scenario.engine_program,
        engine_program_names_of_kind(ProgramKind::kProbes)));
  }
  engine_trainer::ProbeResult probe = engine_trainer::run_probe_program(spec);
  Observation observation;
  observation.as_expected = probe.as_expected;
  observation.observed = observation.summary = probe.observed;
  observation.figures = std::move(probe.figures);
  return observation;
}

// The case's figure conditions against what the run computed: the reasons of those that fail.
std::vector<std::string> failed_conditions(const ScenarioSpec& scenario,
                                           const ObservedFigures& figures) {
  std::vector<std::string> failed;
  for (const std::string& text : scenario.expect_figures) {
    std::string why;
    if (!condition_holds(parse_figure_condition(text), figures, &why)) failed.push_back(why);
  }
  return failed;
}

// Fills the entry from what the run observed: the outcome (the expectation and every figure
// condition met), the verdict it supports, and the fact-check with the run's numbers.
void judge(const CaseSpec& spec, Observation observation, CatalogueEntry& entry) {
  const ScenarioSpec& scenario = spec.scenario;
  observation.figures.set_text("jax_version", spec.jax.version);
  std::vector<std::string> problems = failed_conditions(scenario, observation.figures);
  try {
    entry.fact_check = observation.figures.fill(scenario.fact_check);
  } catch (const InputError& error) {
    entry.fact_check = scenario.fact_check;
    problems.push_back(fmt::format("{}: scenario.fact_check: {}", spec.source_file.string(),
                                   error.what()));
  }
  entry.observed = observation.observed;
  entry.summary = observation.summary;
  if (!problems.empty()) {
    const std::string reasons = fmt::format("{}", fmt::join(problems, "; "));
    entry.observed += " (" + reasons + ")";
    entry.summary += " (" + reasons + ")";
  }
  entry.figures = observation.figures.listing();
  entry.outcome =
      observation.as_expected && problems.empty() ? CaseOutcome::kAsExpected : CaseOutcome::kDiffers;
  entry.verdict = entry.outcome == CaseOutcome::kAsExpected ? scenario.verdict
                                                            : reports::kUnsettledVerdict;
}

}  // namespace

std::string expected_error(const CaseSpec& spec) {
  const std::string prefix = spec.jax.version + ": ";
  for (const std::string& entry : spec.scenario.expect_error_by_release) {
    if (entry.rfind(prefix, 0) == 0) return entry.substr(prefix.size());
  }
  return spec.scenario.expect_error;
}

std::string expected_outcome(const CaseSpec& spec) {
  const ScenarioSpec& scenario = spec.scenario;
  std::string expected;
  if (scenario.expect == "error") {
    expected = fmt::format("error containing \"{}\"", expected_error(spec));
  } else if (scenario.expect == "probe") {
    expected = fmt::format("the engine behaves as JAX does ({})", scenario.engine_program);
  } else if (scenario.expect == "not supported") {
    expected = fmt::format("not yet supported (missing: {})", scenario.missing);
  } else if (scenario.expect_diagnoses.empty()) {
    expected = scenario.expect;
  } else {
    expected = fmt::format("{}; diagnosis {}", scenario.expect,
                           fmt::join(scenario.expect_diagnoses, ", "));
  }
  if (!scenario.expect_figures.empty()) {
    expected += fmt::format("; {}", fmt::join(scenario.expect_figures, "; "));
  }
  return expected;
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
  entry.expected = expected_outcome(spec);
  if (scenario.expect == "not supported") {
    entry.observed = entry.summary = "not run";
    entry.fact_check = scenario.fact_check;
    entry.verdict = "not checked";
    entry.outcome = CaseOutcome::kNotSupported;
    return entry;
  }
  if (scenario.expect == "error" || scenario.expect == "probe") {
    judge(spec, scenario.expect == "error" ? observe_error(spec) : observe_probe(spec), entry);
    reports::write_case_page(entry, spec.to_toml(), dir / "report");
    entry.report_link = fmt::format("../{}/report/{}", dir.filename().string(), reports::kHtmlFile);
    return entry;
  }
  judge(spec, observe_comparison(spec, dir, options, entry), entry);
  return entry;
}

}  // namespace parity::cli
