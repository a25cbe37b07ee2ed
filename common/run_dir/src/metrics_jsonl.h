// metrics.jsonl <-> StepMetrics: one compact object per step, and the reader's checks of every
// line (types, the replica losses against run.json's replicas, strictly increasing steps).
#pragma once

#include <filesystem>
#include <vector>

#include "json_fields.h"
#include "parity/common/run_dir.h"

namespace parity {

Json step_metrics_to_json(const StepMetrics& metrics);

// The steps of metrics.jsonl at `path`, checked against run.json's `info`. `being_written`:
// run.json says "running", so an unterminated last line is the step its producer is writing at
// this moment, not damage; it is left out and the steps before it are read.
std::vector<StepMetrics> read_metrics(const std::filesystem::path& path, const RunInfo& info,
                                      bool being_written);

}  // namespace parity
