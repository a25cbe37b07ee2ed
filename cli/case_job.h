// The main job for one case, shared by `parity run` and `parity cases run`: the case's initial
// parameters once, a DDP run (ddp_ref, ranks as threads) and an engine run (pmap_engine, the
// case's scenario.engine_program, on the case with its scenario.engine_overrides) from them, a
// float64 engine run of the case when the oracle is asked for, and the comparison, under
// DIR/{init.safetensors, ddp/, pmap/, oracle/}; DIR/init-engine.safetensors when the engine's
// overrides change [init].
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "parity/common/case_spec.h"
#include "parity/common/directory_lock.h"
#include "parity/compare/compare.h"

namespace parity::cli {

// Takes DIR for one job, before anything is trained: locks it for as long as the returned lock
// lives (a second job on DIR is refused, naming who holds it) and removes the previous run's
// reports from DIR/report, so that while the job trains, and after it is stopped or fails, no
// old verdict stands beside the new runs. Hold it until the job's reports are written.
std::unique_ptr<DirectoryLock> claim_job_folder(const std::filesystem::path& dir,
                                                const std::string& command);

// Runs one producer's training; a RunError (a rank died, a loss turned NaN) is reported on
// stderr and swallowed: the run directory it leaves says "incomplete", and the comparison says
// where it stopped. Bad input (InputError) propagates.
void train_producer(const std::string& producer, const std::function<void()>& run);

// `options.oracle` is filled in when `oracle` is set (the caller's pointer is not used); the
// case's compare.tensor_rtol/tensor_atol fill the tensor tolerances the options leave unset.
// Progress (phase, bar or lines) goes to stderr under `progress_label`. A producer that fails
// leaves an incomplete run directory, which the comparison reports; bad input throws.
compare::ComparisonResult run_case_job(const CaseSpec& spec, const std::filesystem::path& dir,
                                       compare::CompareOptions options, bool oracle,
                                       const std::string& progress_label);

}  // namespace parity::cli
