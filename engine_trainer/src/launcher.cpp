// engine_trainer::train: the run directory around an EngineTrainer, and a lost process named.
#include "parity/engine_trainer/engine_trainer.h"

#include <fmt/format.h>

#include <chrono>

#include "parity/common/error.h"
#include "parity/common/run_dir.h"
#include "process_session.h"
#include "step_plan.h"
#include "trainer.h"

namespace parity::engine_trainer {
namespace {

RunInfo make_run_info(const CaseSpec& spec, const EngineOptions& options, int64_t processes) {
  RunInfo info = run_info_for_case(spec, "pmap_engine");
  if (options.step.float64) info.dtype = "f64";
  info.processes = processes;
  info.parallel_style = spec.parallel.style;
  info.versions["pmap_engine"] = PARITY_VERSION;
  // The JAX release the engine modelled (jax.version), so that a report names it.
  info.versions["jax"] = spec.jax.version;
  return info;
}

}  // namespace

ProducerSummary train(const CaseSpec& spec, const EngineOptions& options,
                      const std::optional<ProcessPlace>& place) {
  const auto run_start = std::chrono::steady_clock::now();
  // The case and the program resolved once; the case's JAX release in effect while it lives.
  const EngineRunPlan plan(spec, options.step, place);
  // Declared before the session, so that a failed exchange can still be recorded in it.
  std::optional<RunDirWriter> writer;
  try {
    const ProcessSession process(spec, plan.step.program, place, options.timeout_seconds);
    EngineTrainer trainer(plan, options, process, run_start);
    if (process.writes()) {
      writer.emplace(options.out_dir, make_run_info(spec, options, process.count()),
                     options.overwrite);
    }
    return trainer.run(writer ? &*writer : nullptr);
  } catch (const pmap_engine::distributed::CollectiveFailed& error) {
    const std::string why = describe_collective_failure(error);
    if (writer) writer->mark_incomplete(why);
    throw RunError(why);
  }
}

}  // namespace parity::engine_trainer
