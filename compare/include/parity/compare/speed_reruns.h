// The runs a speed verdict is judged from (parity gate --speed-baseline / --speed-candidate, or
// its own reruns) must be independent measurements of the runs they stand for: each one of its
// side's case, by its side's producer, and no run counted twice. The same directory given
// three times, or three copies of one run, would turn one pair of timings (inconclusive) into
// three (a conclusive verdict).
#pragma once

#include <vector>

#include "parity/common/run_dir.h"

namespace parity::compare {

// InputError naming the run and the mismatch when a baseline rerun is not of `baseline`'s case
// (hash) and producer, or a candidate rerun not of `candidate`'s; naming both when two of all
// the reruns are one directory (after resolving the paths) or one run (the same start, host
// and steps' metrics: a copy).
void check_speed_reruns(const std::vector<RunDir>& baseline_runs, const RunDir& baseline,
                        const std::vector<RunDir>& candidate_runs, const RunDir& candidate);

}  // namespace parity::compare
