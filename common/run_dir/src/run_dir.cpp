// Reading a run directory back, validated (run_dir.h); its files are read by run_json.cpp,
// metrics_jsonl.cpp, rng_streams.cpp and recorded_tensors.cpp, what a run promises is held to by
// run_dir_promises.cpp.
#include "parity/common/run_dir.h"

#include "json_fields.h"
#include "metrics_jsonl.h"
#include "parity/common/error.h"
#include "parity/common/rng_streams.h"
#include "run_dir_files.h"
#include "run_dir_promises.h"
#include "run_json.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

}  // namespace

RunDir read_run_dir(const std::filesystem::path& dir) {
  const fs::path run_json = dir / kRunJson;
  if (!fs::is_regular_file(run_json)) {
    throw InputError("not a run directory: no run.json in " + dir.string());
  }
  const Json document = parse_json_document(read_text_file(run_json), run_json.string());

  RunDir run;
  run.dir = dir;
  run.info = run_info_from_json(document, run_json.string());
  run.steps = read_metrics(dir / kMetricsJsonl, run.info, run.info.status == "running");
  run.tensor_steps = list_recorded_steps(dir, kStepTensorsPrefix);
  run.intermediate_steps = list_recorded_steps(dir, kIntermediatesPrefix);
  std::vector<int64_t> steps;
  for (const StepMetrics& metrics : run.steps) steps.push_back(metrics.step);
  run.rng = read_rng_streams(dir, run.info.replicas, steps, run.info.status == "running");
  hold_to_promises(run);
  return run;
}

bool mark_run_dir_incomplete(const std::filesystem::path& dir, const std::string& why) {
  const fs::path run_json = dir / kRunJson;
  std::error_code error;
  if (!fs::is_regular_file(run_json, error)) return false;
  Json document;
  try {
    document = Json::parse(read_text_file(run_json));
  } catch (const std::exception&) {
    return false;  // not ours to repair; the reader will say what is wrong with it
  }
  if (!document.is_object() || document.value("status", "") != "running") return false;
  document["status"] = "incomplete";
  document["failure"] = why;
  write_text_file_atomically(run_json,
                             document.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
  return true;
}

}  // namespace parity
