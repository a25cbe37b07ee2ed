// parity run: the main job (case_job.h) for each case, with its reports under OUT/CASE/report
// and the verdict table on stdout.
#include <algorithm>

#include <fmt/format.h>

#include "case_job.h"
#include "commands.h"
#include "comparison_output.h"
#include "numeric_options.h"
#include "output_options.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "seeds_job.h"

namespace parity::cli {
namespace {

// More seeds than anyone trains: 1,000 runs of each producer.
constexpr int64_t kMaxSeeds = 1000;

struct RunCommandArguments : ComparisonArguments {
  std::vector<std::string> cases;
  std::vector<std::string> overrides;
  std::string out = "parity-out";
  bool oracle = false;
  int64_t seeds = 0;  // 0: one pair compared step by step
  std::vector<std::string> ddp_overrides;
};

int run_case(const std::string& case_name, const RunCommandArguments& arguments) {
  const CaseSpec spec = load_case(case_name, arguments.overrides);
  const std::filesystem::path dir = std::filesystem::path(arguments.out) / spec.name;
  const auto job_folder = claim_job_folder(dir, "parity run " + spec.name);
  if (arguments.seeds > 0) {
    SeedsJob job{case_name, arguments.overrides, arguments.ddp_overrides, arguments.seeds, dir};
    const compare::ComparisonResult result = run_seeds_job(
        job, seed_set_options(arguments),
        fmt::format("parity run {} --seeds {}", spec.name, arguments.seeds));
    return finish_comparison(result, dir / "report", arguments);
  }
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
  command->add_option("--out", arguments->out, "output folder (default parity-out)")
      ->check(output_name());
  command->add_flag("--oracle", arguments->oracle,
                    "also train the engine in float64 (OUT/CASE/oracle) and judge both runs' "
                    "losses against it, as the case key compare.oracle = true does");
  command
      ->add_option("--seeds", arguments->seeds,
                   "train N seeds per producer (seed K: the case's compare.seed_keys + K, "
                   "rng.seed by default) and judge the final test loss and accuracy "
                   "distributions with a two-sided equivalence test (TOST) instead of step by "
                   "step: for runs whose dropout streams differ by design (rng.ddp = \"torch\"). "
                   "Exit 5 when inconclusive")
      ->check(integer_in(2, kMaxSeeds));
  command->add_option("--set-ddp", arguments->ddp_overrides,
                      "with --seeds: override a case key for ddp_ref's runs only, e.g. "
                      "--set-ddp train.lr=1.2e-3 to see that a real difference is told apart");
  add_comparison_options(command, *arguments);
  command->callback([arguments, &exit_status] {
    if (!arguments->ddp_overrides.empty() && arguments->seeds == 0) {
      throw InputError("--set-ddp needs --seeds: a step-by-step comparison of runs that train "
                       "different cases tells nothing new; use --set for both producers");
    }
    if (arguments->oracle && arguments->seeds > 0) {
      throw InputError("--oracle judges one pair of runs step by step and --seeds judges "
                       "distributions over seeds; choose one");
    }
    const std::vector<std::string> names =
        arguments->cases.empty() ? std::vector<std::string>{"mlp2-fmnist"} : arguments->cases;
    for (const std::string& name : names) {
      exit_status = std::max(exit_status, run_case(name, *arguments));
    }
  });
}

}  // namespace parity::cli
