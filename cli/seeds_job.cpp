#include "seeds_job.h"

#include <fmt/format.h>

#include <algorithm>

#include "case_init.h"
#include "case_job.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"
#include "parity/common/progress.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/scenario_programs.h"
#include "producer_processes.h"
#include "run_output.h"

namespace parity::cli {
namespace {

uint64_t seed_value(const CaseSpec& spec, const std::string& key) {
  if (key == "rng.seed") return spec.rng.seed;
  if (key == "data.seed") return spec.data.seed;
  return spec.init.seed;  // "init.seed": the case checker allows these three only
}

// The overrides of seed K: each varied seed set to the case's value + K.
std::vector<std::string> seed_overrides(const CaseSpec& spec, int64_t k) {
  std::vector<std::string> overrides;
  for (const std::string& key : spec.compare.seed_keys) {
    overrides.push_back(
        fmt::format("{}={}", key, seed_value(spec, key) + static_cast<uint64_t>(k)));
  }
  return overrides;
}

std::vector<std::string> joined(std::vector<std::string> first,
                                const std::vector<std::string>& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

void check_job(const SeedsJob& job, const CaseSpec& spec) {
  if (spec.scenario.reference != "ddp_ref") {
    throw InputError(fmt::format(
        "{}: --seeds compares the engine's runs with ddp_ref's, but the case's reference is "
        "the engine (scenario.reference = \"{}\"); run it without --seeds",
        spec.source_file.string(), spec.scenario.reference));
  }
  for (const std::string& override : job.ddp_overrides) {
    if (override.rfind("init.", 0) == 0) {
      throw InputError(fmt::format(
          "--set-ddp {}: both producers start from one init file made from the case; set init "
          "keys with --set, for both",
          override));
    }
  }
}

}  // namespace

compare::ComparisonResult run_seeds_job(const SeedsJob& job,
                                        const compare::SeedSetOptions& options,
                                        const std::string& progress_label) {
  const CaseSpec spec = load_case(job.case_name, job.overrides);
  check_job(job, spec);
  // Every seed's case loads (and is checked) before anything trains.
  std::vector<CaseSpec> engine_specs;
  std::vector<CaseSpec> ddp_specs;
  for (int64_t k = 0; k < job.seeds; ++k) {
    const std::vector<std::string> seeds = seed_overrides(spec, k);
    // The engine trains each seed's case with the case's engine_overrides, as run_case_job.
    engine_specs.push_back(engine_case(load_case(job.case_name, joined(job.overrides, seeds))));
    ddp_specs.push_back(
        load_case(job.case_name, joined(joined(job.overrides, job.ddp_overrides), seeds)));
  }
  engine_trainer::require_training_program(spec, find_engine_program(spec.scenario.engine_program));

  const std::filesystem::path seeds_dir = job.dir / "seeds";
  std::filesystem::remove_all(seeds_dir);
  const bool init_varies = std::count(spec.compare.seed_keys.begin(),
                                      spec.compare.seed_keys.end(), "init.seed") > 0;
  const std::filesystem::path shared_init =
      init_varies ? std::filesystem::path() : ensure_init_file(spec, "", job.dir);

  const int64_t steps = spec.train.steps;
  Progress progress(progress_label, 2 * job.seeds * steps + 1);
  std::vector<std::filesystem::path> engine_runs;
  std::vector<std::filesystem::path> ddp_runs;
  for (int64_t k = 0; k < job.seeds; ++k) {
    const std::string name = fmt::format("seed-{}", k);
    const int64_t done_before = 2 * k * steps;
    ddp_ref::DdpOptions ddp;
    ddp.out_dir = seeds_dir / "ddp" / name;
    ddp.init_file = shared_init;
    if (init_varies) {
      ddp.init_file = seeds_dir / "init" / (name + ".safetensors");
      create_output_directory(ddp.init_file.parent_path());
      write_init_file(ddp.init_file, ddp_specs[k]);
    }
    ddp.overwrite = true;
    ddp.quiet = true;
    ddp.on_step = [&](int64_t done) { progress.update(done_before + done); };
    progress.phase(fmt::format("seed {} of {}: ddp_ref, {} ranks", k + 1, job.seeds,
                               spec.parallel.replicas));
    train_producer("ddp_ref", [&] { ddp_ref::train(ddp_specs[k], ddp); });
    ddp_runs.push_back(ddp.out_dir);

    engine_trainer::EngineOptions engine;
    engine.out_dir = seeds_dir / "pmap" / name;
    engine.init_file = engine_init_file(
        ddp_specs[k], engine_specs[k], ddp.init_file,
        init_varies ? seeds_dir / "init" / (name + "-engine.safetensors")
                    : job.dir / "init-engine.safetensors");
    engine.overwrite = true;
    engine.quiet = true;
    engine.step.program = spec.scenario.engine_program;
    engine.on_step = [&](int64_t done) { progress.update(done_before + steps + done); };
    progress.update(done_before + steps);
    progress.phase(fmt::format("seed {} of {}: pmap_engine, {} devices", k + 1, job.seeds,
                               spec.parallel.replicas));
    train_producer("pmap_engine", [&] {
      train_engine(engine_specs[k], engine, spec.parallel.processes);
    });
    engine_runs.push_back(engine.out_dir);
  }
  progress.update(2 * job.seeds * steps);
  progress.phase("compare");
  compare::ComparisonResult result =
      compare::compare_seed_set_dirs(engine_runs, ddp_runs, options);
  progress.update(2 * job.seeds * steps + 1);
  progress.finish();
  return result;
}

}  // namespace parity::cli
