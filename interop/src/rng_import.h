// The dropout draws interop/python's helpers log beside their metrics (LOG_DIR/rng.jsonl, in the
// run directory's format: rng_streams.h), which `parity import metrics` carries into the run
// directory so that compare's RNG check judges them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/rng_streams.h"

namespace parity::interop {

// The draws of rng.jsonl in the folder of `metrics_source` (the folder itself when it is one),
// by step; empty when there is no such file. The file is read as a run directory's (every line
// checked, every imported step holding every replica of the case at every site); InputError
// naming the file for that, for draws at a step outside `steps`, the steps imported, and for
// draws of a case without dropout.
std::map<int64_t, std::vector<MaskDraw>> read_logged_draws(
    const std::filesystem::path& metrics_source, const CaseSpec& spec,
    const std::vector<int64_t>& steps);

}  // namespace parity::interop
