// parity cases: the case files, and the catalogue of the documents' scenarios among them.
//   parity cases list                  every case, with its scenario id
//   parity cases show ID|NAME          one case: the document's claim, the expectation, the TOML
//   parity cases run [ID ...] [--all]  run scenario cases (quick variants unless --full), judge
//                                      each against its expectation, print the verdict on each
//                                      claim with what the run showed, write the catalogue
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iostream>

#include "commands.h"
#include "comparison_output.h"
#include "output_options.h"
#include "parity/common/case_spec.h"
#include "parity/common/directory_lock.h"
#include "parity/common/error.h"
#include "parity/reports/catalogue.h"
#include "pmap_engine/jax_release.h"
#include "run_output.h"
#include "scenario_run.h"

namespace parity::cli {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The first line of `text`, cut to 72 bytes with an ellipsis (descriptions run long).
std::string first_line(const std::string& text) {
  constexpr size_t kWidth = 72;
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() <= kWidth) return line;
  size_t cut = kWidth;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  return line.substr(0, cut) + "…";
}

// The case whose scenario id (any case) or name is `wanted`.
CaseSpec find_case(const std::vector<CaseSpec>& specs, const std::string& wanted) {
  for (const CaseSpec& spec : specs) {
    if (spec.name == wanted ||
        (!spec.scenario.id.empty() && lower(spec.scenario.id) == lower(wanted))) {
      return spec;
    }
  }
  std::vector<std::string> known;
  for (const CaseSpec& spec : specs)
    known.push_back(spec.scenario.id.empty() ? spec.name : spec.scenario.id);
  throw InputError(fmt::format("no case with id or name '{}' in {}; known: {}", wanted,
                               cases_dir().string(), fmt::join(known, ", ")));
}

// S (semantics), P (pitfalls), R (RNG items), C (claims no pitfall covers), M (migration
// defaults, ../shared/docs/migration-defaults.md), then any other letter; by number within
// each; cases without a scenario last, by name (list_cases' order).
void sort_in_catalogue_order(std::vector<CaseSpec>& specs) {
  auto order = [](const CaseSpec& spec) {
    const std::string& id = spec.scenario.id;
    if (id.empty()) return std::make_pair(std::string::npos, 0);
    const std::string letters = "SPRCM";
    return std::make_pair(letters.find(id.front()), std::stoi("0" + id.substr(1)));
  };
  std::stable_sort(specs.begin(), specs.end(),
                   [&](const CaseSpec& a, const CaseSpec& b) { return order(a) < order(b); });
}

void list_command() {
  std::vector<CaseSpec> specs = list_cases();
  sort_in_catalogue_order(specs);
  std::cout << fmt::format("{:<5} {:<28} {:>8} {:>6}  {}\n", "id", "case", "replicas", "steps",
                           "title or description");
  for (const CaseSpec& spec : specs) {
    const std::string& title = spec.scenario.id.empty() ? spec.description : spec.scenario.title;
    std::cout << fmt::format("{:<5} {:<28} {:>8} {:>6}  {}\n",
                             spec.scenario.id.empty() ? "-" : spec.scenario.id, spec.name,
                             spec.parallel.replicas, spec.train.steps, first_line(title));
  }
  std::cout << fmt::format("({} cases in {})\n", specs.size(), cases_dir().string());
}

void show_command(const std::string& wanted) {
  const CaseSpec spec = find_case(list_cases(), wanted);
  const ScenarioSpec& scenario = spec.scenario;
  if (!scenario.id.empty()) {
    std::cout << fmt::format(
        "{} {}\n  source       {}\n  claim        {}\n  verdict      {} (when the run behaves "
        "as expected)\n  expected     {}\n  program      {}\n",
        scenario.id, scenario.title, scenario.source, scenario.claim, scenario.verdict,
        expected_outcome(spec), scenario.engine_program);
    if (!scenario.engine_overrides.empty()) {
      std::cout << fmt::format("  engine sets  {} (ddp_ref trains the case without)\n",
                               fmt::join(scenario.engine_overrides, ", "));
    }
    if (!scenario.fact_check.empty()) {
      std::cout << fmt::format("  fact-check   {}\n  (figures in braces are filled from the run)\n",
                               scenario.fact_check);
    }
    std::cout << fmt::format("  quick        --set {}\n\n", fmt::join(scenario.quick, " --set "));
  }
  std::cout << "# " << spec.source_file.string() << "\n" << spec.to_toml();
}

struct RunArgumentsOfCases : ComparisonArguments {
  std::vector<std::string> wanted;
  bool all = false;
  bool full = false;
  std::vector<std::string> overrides;
  std::string jax_version;  // --jax-version: jax.version for every case
  std::string out = "parity-out/cases";
};

// The scenario cases to run, in catalogue order (S, P, R, C, M, then by number).
std::vector<CaseSpec> selected_cases(const RunArgumentsOfCases& arguments) {
  const std::vector<CaseSpec> all = list_cases();
  std::vector<CaseSpec> selected;
  if (arguments.all) {
    std::copy_if(all.begin(), all.end(), std::back_inserter(selected),
                 [](const CaseSpec& spec) { return !spec.scenario.id.empty(); });
  } else {
    for (const std::string& wanted : arguments.wanted) {
      const CaseSpec spec = find_case(all, wanted);
      if (spec.scenario.id.empty()) {
        throw InputError(fmt::format("case {} has no [scenario]: run it with parity run {}",
                                     spec.name, spec.name));
      }
      selected.push_back(spec);
    }
  }
  sort_in_catalogue_order(selected);
  return selected;
}

int run_command(const RunArgumentsOfCases& arguments) {
  if (arguments.all == !arguments.wanted.empty()) {
    throw InputError("parity cases run: name the cases (ids or names) or give --all, not both");
  }
  std::vector<reports::CatalogueEntry> entries;
  const std::filesystem::path out(arguments.out);
  create_output_directory(out);  // before any case runs: --out must be a directory
  // Each case's folder is locked by its own job; the catalogue is this command's.
  const DirectoryLock catalogue_lock(out / "catalogue", "parity cases run");
  for (const CaseSpec& selected : selected_cases(arguments)) {
    std::vector<std::string> overrides =
        arguments.full ? std::vector<std::string>{} : selected.scenario.quick;
    overrides.insert(overrides.end(), arguments.overrides.begin(), arguments.overrides.end());
    if (!arguments.jax_version.empty()) overrides.push_back("jax.version=" + arguments.jax_version);
    const CaseSpec spec = load_case(selected.source_file.string(), overrides);
    entries.push_back(run_scenario(spec, out / spec.name, comparison_options(arguments)));
    const reports::CatalogueEntry& entry = entries.back();
    // One line per case: the verdict on the document's claim, the topic, what the run showed.
    std::cout << fmt::format("{:<4} {:<21} {}: {}\n", entry.id, entry.verdict, entry.title,
                             entry.summary)
              << std::flush;  // before the next case's progress on stderr
    if (entry.outcome == reports::CaseOutcome::kDiffers) {
      std::cout << fmt::format("     differs from the case's expectation\n     expected {}\n"
                               "     observed {}\n",
                               entry.expected, entry.observed)
                << std::flush;
    }
  }
  reports::write_catalogue_report(entries, out / "catalogue");
  std::cout << "catalogue: " << (out / "catalogue" / reports::kCatalogueHtmlFile).string() << "\n";
  const bool differs = std::any_of(entries.begin(), entries.end(), [](const auto& entry) {
    return entry.outcome == reports::CaseOutcome::kDiffers;
  });
  return differs ? 1 : 0;
}

}  // namespace

void register_cases_command(CLI::App& app, int& exit_status) {
  CLI::App* cases = app.add_subcommand("cases", "The scenarios parity reproduces");
  cases->require_subcommand(1);
  cases->add_subcommand("list", "List the case files in the cases folder")->callback(list_command);

  auto shown = std::make_shared<std::string>();
  CLI::App* show = cases->add_subcommand(
      "show", "One case: the document's claim, what parity expects, the canonical TOML");
  show->add_option("case", *shown, "scenario id (P2) or case name")->required();
  show->callback([shown] { show_command(*shown); });

  auto arguments = std::make_shared<RunArgumentsOfCases>();
  CLI::App* run = cases->add_subcommand(
      "run",
      "Run scenario cases (their quick variants unless --full), judge each against its "
      "expectation and write the catalogue report to OUT/catalogue. Exit 0 when every case "
      "behaves as expected (or is not supported yet), 1 when one differs");
  run->add_option("cases", arguments->wanted, "scenario ids (P2) or case names");
  run->add_flag("--all", arguments->all, "every case with a [scenario]");
  run->add_flag("--full", arguments->full, "the full variants (the case files as written)");
  run->add_option("--set", arguments->overrides, "override a case key for every case");
  run->add_option("--jax-version", arguments->jax_version,
                  "the JAX release the engine models for every case (as --set jax.version=V)")
      ->check(CLI::IsMember(pmap_engine::jax_release_names()));
  run->add_option("--out", arguments->out, "output folder (default parity-out/cases)")
      ->check(output_name());
  add_comparison_options(run, *arguments);
  run->callback([arguments, &exit_status] { exit_status = run_command(*arguments); });
}

}  // namespace parity::cli
