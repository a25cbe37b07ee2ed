// The main job for one case, shared by `parity run` and `parity cases run`: the case's initial
// parameters once, a DDP run (ddp_ref, ranks as threads) and an engine run (pmap_engine, the
// case's scenario.engine_program) from them, a float64 engine run when the oracle is asked for,
// and the comparison, under DIR/{init.safetensors, ddp/, pmap/, oracle/}.
#pragma once

#include <filesystem>
#include <string>

#include "parity/common/case_spec.h"
#include "parity/compare/compare.h"

namespace parity::cli {

// `options.oracle` is filled in when `oracle` is set (the caller's pointer is not used); the
// case's compare.tensor_rtol/tensor_atol fill the tensor tolerances the options leave unset.
// Progress (phase, bar or lines) goes to stderr under `progress_label`. A producer that fails
// leaves an incomplete run directory, which the comparison reports; bad input throws.
compare::ComparisonResult run_case_job(const CaseSpec& spec, const std::filesystem::path& dir,
                                       compare::CompareOptions options, bool oracle,
                                       const std::string& progress_label);

}  // namespace parity::cli
