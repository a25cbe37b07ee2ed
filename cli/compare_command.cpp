#include "commands.h"
#include "comparison_output.h"
#include "output_options.h"
#include "parity/common/error.h"
#include "parity/common/run_dir.h"

namespace parity::cli {

void register_compare_command(CLI::App& app, int& exit_status) {
  struct Arguments : ComparisonArguments {
    std::string run_a, run_b, report, oracle;
    bool seeds = false;
    bool overwrite = false;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "Judge two run directories step by step (A under test, B the reference) and name the "
      "likely cause of a divergence; with --seeds, judge two sets of runs over seeds by their "
      "final values. Exit 0 equivalent, 1 not equivalent, 2 bad input, 3 a run is incomplete, "
      "5 inconclusive (--seeds)");
  command->add_option("run_a", arguments->run_a, "run directory under test (e.g. the pmap run)")
      ->required();
  command->add_option("run_b", arguments->run_b, "reference run directory (e.g. the DDP run)")
      ->required();
  add_report_options(command, arguments->report, arguments->overwrite, "comparison");
  command->add_option("--oracle", arguments->oracle,
                      "a higher-precision run of the same case (parity pmap CASE --float64): "
                      "each run's loss error against it separates float noise from divergence");
  command->add_flag(
      "--seeds", arguments->seeds,
      "RUN_A and RUN_B are folders of runs, one subfolder per seed (as parity run --seeds "
      "writes OUT/CASE/seeds/pmap and OUT/CASE/seeds/ddp, or imported runs): judge the final "
      "test loss and accuracy distributions with a two-sided equivalence test (TOST)");
  add_comparison_options(command, *arguments);
  command->callback([arguments, &exit_status] {
    const auto report_folder =
        claim_report_folder(arguments->report, "parity compare", arguments->overwrite);
    if (arguments->seeds) {
      if (!arguments->oracle.empty()) {
        throw InputError("--oracle judges one pair of runs step by step, --seeds judges "
                         "distributions over seeds; choose one");
      }
      const compare::SeedSetOptions options = seed_set_options(*arguments);
      const compare::ComparisonResult result = compare::compare_seed_set_dirs(
          compare::seed_set_runs(arguments->run_a), compare::seed_set_runs(arguments->run_b),
          options);
      exit_status = finish_comparison(result, arguments->report, *arguments);
      return;
    }
    compare::CompareOptions options = comparison_options(*arguments);
    std::optional<RunDir> oracle;
    if (!arguments->oracle.empty()) oracle = read_run_dir(arguments->oracle);
    options.oracle = oracle ? &*oracle : nullptr;
    const compare::ComparisonResult result =
        compare::compare_run_dirs(arguments->run_a, arguments->run_b, options);
    exit_status = finish_comparison(result, arguments->report, *arguments);
  });
}

}  // namespace parity::cli
