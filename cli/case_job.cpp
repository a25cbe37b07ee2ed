#include "case_job.h"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <optional>

#include "case_init.h"
#include "parity/common/error.h"
#include "parity/common/progress.h"
#include "parity/common/run_dir.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/scenario_programs.h"
#include "parity/reports/reports.h"
#include "producer_processes.h"
#include "run_output.h"

namespace parity::cli {
void train_producer(const std::string& producer, const std::function<void()>& run) {
  try {
    run();
  } catch (const RunError& error) {
    std::cerr << fmt::format("parity: {} failed: {}\n", producer, error.what());
  }
}

std::unique_ptr<DirectoryLock> claim_job_folder(const std::filesystem::path& dir,
                                                const std::string& command) {
  auto lock = std::make_unique<DirectoryLock>(dir, command);
  reports::remove_reports(dir / "report");
  return lock;
}

compare::ComparisonResult run_case_job(const CaseSpec& spec, const std::filesystem::path& dir,
                                       compare::CompareOptions options, bool oracle,
                                       const std::string& progress_label) {
  engine_trainer::require_training_program(spec, find_engine_program(spec.scenario.engine_program));
  // The engine under test trains the case with its engine_overrides (the defaults a port kept);
  // the reference, ddp_ref or the engine's pmean step, and the oracle train the case itself.
  const CaseSpec engine_spec = engine_case(spec);
  const std::filesystem::path init = ensure_init_file(spec, "", dir);
  const int64_t steps = spec.train.steps;
  const int64_t trainings = oracle ? 3 : 2;
  Progress progress(progress_label, trainings * steps + 1);

  engine_trainer::EngineOptions engine;
  engine.init_file = init;
  engine.out_dir = dir / "pmap";
  engine.overwrite = true;  // the job owns DIR: a rerun replaces its previous results
  engine.quiet = true;
  engine.step.program = spec.scenario.engine_program;

  std::filesystem::path reference_dir;
  if (spec.scenario.reference == "engine") {
    engine_trainer::EngineOptions reference = engine;
    reference.out_dir = reference_dir = dir / "reference";
    reference.step.program = "pmean";
    reference.on_step = [&](int64_t done) { progress.update(done); };
    progress.phase(fmt::format("pmap_engine (pmean), {} devices", spec.parallel.replicas));
    // The reference and the oracle train in one process: a multi-process run computes the same
    // global pmap over the same batches, and only the engine leg under test needs the processes.
    train_producer("pmap_engine (pmean)", [&] { train_engine(spec, reference, 1); });
  } else {
    ddp_ref::DdpOptions ddp;
    ddp.init_file = init;
    ddp.out_dir = reference_dir = dir / "ddp";
    ddp.overwrite = true;
    ddp.quiet = true;
    ddp.on_step = [&](int64_t done) { progress.update(done); };
    progress.phase(fmt::format("ddp_ref, {} ranks", spec.parallel.replicas));
    train_producer("ddp_ref", [&] { ddp_ref::train(spec, ddp); });
  }

  engine.init_file = engine_init_file(spec, engine_spec, init, dir / "init-engine.safetensors");
  engine.on_step = [&](int64_t done) { progress.update(steps + done); };
  progress.update(steps);
  progress.phase(spec.parallel.processes > 1
                     ? fmt::format("pmap_engine, {} devices in {} processes",
                                   spec.parallel.replicas, spec.parallel.processes)
                     : fmt::format("pmap_engine, {} devices", spec.parallel.replicas));
  train_producer("pmap_engine",
                 [&] { train_engine(engine_spec, engine, engine_spec.parallel.processes); });

  // The case's own tensor band, unless the command line gave one.
  if (!options.tensor_rtol && spec.compare.tensor_rtol > 0) {
    options.tensor_rtol = spec.compare.tensor_rtol;
  }
  if (!options.tensor_atol && spec.compare.tensor_atol > 0) {
    options.tensor_atol = spec.compare.tensor_atol;
  }
  std::optional<RunDir> oracle_run;
  options.oracle = nullptr;
  if (oracle) {
    // The oracle is the reference's computation in f64: the faithful program on the case as
    // the reference trains it (without engine_overrides), whatever the engine run under test
    // does.
    engine_trainer::EngineOptions reference = engine;
    reference.init_file = init;
    reference.out_dir = dir / "oracle";
    reference.step.program = "pmean";
    reference.step.float64 = true;
    reference.evaluate = false;
    reference.on_step = [&](int64_t done) { progress.update(2 * steps + done); };
    progress.update(2 * steps);
    progress.phase(fmt::format("float64 oracle, {} devices", spec.parallel.replicas));
    train_producer("the float64 oracle", [&] { train_engine(spec, reference, 1); });
    oracle_run = read_run_dir(reference.out_dir);
    options.oracle = &*oracle_run;
  }

  progress.update(trainings * steps);
  progress.phase("compare");
  compare::ComparisonResult result =
      compare::compare_run_dirs(engine.out_dir, reference_dir, options);
  progress.update(trainings * steps + 1);
  progress.finish();
  return result;
}

}  // namespace parity::cli
