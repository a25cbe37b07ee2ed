// parity run: the main job (case_job.h) for each case, with its reports under OUT/CASE/report
// and the verdict table on stdout.
#include <algorithm>

#include "case_job.h"
#include "commands.h"
#include "comparison_output.h"
#include "parity/common/case_spec.h"

namespace parity::cli {
namespace {

struct RunCommandArguments : ComparisonArguments {
  std::vector<std::string> cases;
  std::vector<std::string> overrides;
  std::string out = "parity-out";
  bool oracle = false;
};

int run_case(const std::string& case_name, const RunCommandArguments& arguments) {
  const CaseSpec spec = load_case(case_name, arguments.overrides);
  const std::filesystem::path dir = std::filesystem::path(arguments.out) / spec.name;
  const auto job_folder = claim_job_folder(dir, "parity run " + spec.name);
  const compare::ComparisonResult result =
      run_case_job(spec, dir, comparison_options(arguments),
                   arguments.oracle || spec.compare.oracle, "parity run " + spec.name);
  return finish_comparison(result, dir / "report", arguments);
}

}  // namespace

void register_run_command(CLI::App& app, int& exit_status) {
  auto arguments = std::make_shared<RunCommandArguments>();
  CLI::App* command = app.add_subcommand(
      "run",
      "The main job: train each case with ddp_ref and pmap_engine from the same initial "
      "parameters, compare the runs and write the reports to OUT/CASE/report. Exit 0 when every "
      "case is equivalent, 1 when one is not, 3 when a run is incomplete");
  command->add_option("cases", arguments->cases, "case names or .toml paths (default mlp2-fmnist)");
  command->add_option("--set", arguments->overrides,
                      "override a case key for every case, e.g. --set train.steps=50");
  command->add_option("--out", arguments->out, "output folder (default parity-out)");
  command->add_flag("--oracle", arguments->oracle,
                    "also train the engine in float64 (OUT/CASE/oracle) and judge both runs' "
                    "losses against it, as the case key compare.oracle = true does");
  add_comparison_options(command, *arguments);
  command->callback([arguments, &exit_status] {
    const std::vector<std::string> names =
        arguments->cases.empty() ? std::vector<std::string>{"mlp2-fmnist"} : arguments->cases;
    for (const std::string& name : names) {
      exit_status = std::max(exit_status, run_case(name, *arguments));
    }
  });
}

}  // namespace parity::cli
