// parity run: the main job. For each case: its initial parameters once, a DDP run (ddp_ref,
// ranks as threads) and an engine run (pmap_engine) from them, with --oracle (or the case's
// compare.oracle) a float64 engine run too, the comparison and its reports under
// OUT/CASE/{init.safetensors, ddp/, pmap/, oracle/, report/}.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "commands.h"
#include "comparison_output.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/common/progress.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "pmap_trainer.h"
#include "run_output.h"

namespace parity::cli {
namespace {

struct RunCommandArguments : ComparisonArguments {
  std::vector<std::string> cases;
  std::vector<std::string> overrides;
  std::string out = "parity-out";
  bool oracle = false;
};

// A producer that fails (a rank dies, a loss turns NaN) leaves an incomplete run directory;
// the comparison still reads what it recorded and says where it stopped.
void train(const std::string& producer, const std::function<void()>& run) {
  try {
    run();
  } catch (const RunError& error) {
    std::cerr << fmt::format("parity run: {} failed: {}\n", producer, error.what());
  }
}

int run_case(const std::string& case_name, const RunCommandArguments& arguments) {
  const CaseSpec spec = load_case(case_name, arguments.overrides);
  const std::filesystem::path dir = std::filesystem::path(arguments.out) / spec.name;
  const std::filesystem::path init = ensure_init_file(spec, "", dir);
  const int64_t steps = spec.train.steps;
  const bool oracle = arguments.oracle || spec.compare.oracle;
  const int64_t trainings = oracle ? 3 : 2;
  Progress progress("parity run " + spec.name, trainings * steps + 1);

  ddp_ref::DdpOptions ddp;
  ddp.init_file = init;
  ddp.out_dir = dir / "ddp";
  ddp.overwrite = true;  // parity run owns OUT/CASE: a rerun replaces its previous results
  ddp.quiet = true;
  ddp.on_step = [&](int64_t done) { progress.update(done); };
  progress.phase(fmt::format("ddp_ref, {} ranks", spec.parallel.replicas));
  train("ddp_ref", [&] { ddp_ref::run_threads(spec, ddp); });

  cases::PmapRunOptions engine;
  engine.init_file = init;
  engine.out_dir = dir / "pmap";
  engine.overwrite = true;
  engine.quiet = true;
  engine.on_step = [&](int64_t done) { progress.update(steps + done); };
  progress.update(steps);
  progress.phase(fmt::format("pmap_engine, {} devices", spec.parallel.replicas));
  train("pmap_engine", [&] { cases::run_pmap(spec, engine); });

  compare::CompareOptions options = comparison_options(arguments);
  std::optional<RunDir> oracle_run;
  if (oracle) {
    cases::PmapRunOptions reference = engine;
    reference.out_dir = dir / "oracle";
    reference.step.float64 = true;
    reference.on_step = [&](int64_t done) { progress.update(2 * steps + done); };
    progress.update(2 * steps);
    progress.phase(fmt::format("float64 oracle, {} devices", spec.parallel.replicas));
    train("the float64 oracle", [&] { cases::run_pmap(spec, reference); });
    oracle_run = read_run_dir(reference.out_dir);
    options.oracle = &*oracle_run;
  }

  progress.update(trainings * steps);
  progress.phase("compare");
  const compare::ComparisonResult result =
      compare::compare_run_dirs(engine.out_dir, ddp.out_dir, options);
  progress.update(trainings * steps + 1);
  progress.finish();
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
