#include "run_dir_promises.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "parity/common/error.h"
#include "parity/common/layer_intermediates.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

void demote(RunDir& run, std::string why) {
  run.info.status = "incomplete";
  run.info.failure = std::move(why);
}

// A producer's run writes each of steps 0..steps-1 once, an import each step it imported: more
// lines than that is not a longer run but a damaged run.json or metrics.jsonl.
void refuse_more_steps_than_promised(const RunDir& run) {
  const int64_t promised = run.info.steps;
  const auto recorded = static_cast<int64_t>(run.steps.size());
  if (promised < 0 || recorded <= promised) return;
  throw InputError(fmt::format(
      "{}: key \"steps\": the run promises {} steps, but {} holds {} (steps {}..{}); one of the "
      "two files is damaged or belongs to another run: rerun the producer (or, when the lines "
      "are right, set \"steps\" to {})",
      (run.dir / "run.json").string(), promised, (run.dir / "metrics.jsonl").string(), recorded,
      run.steps.front().step, run.steps.back().step, recorded));
}

// A "complete" run with fewer lines was cut short after the fact (a truncated copy, an edited
// file).
void demote_if_steps_missing(RunDir& run) {
  const int64_t promised = run.info.steps;
  const auto recorded = static_cast<int64_t>(run.steps.size());
  if (run.info.status != "complete" || promised < 0 || recorded == promised) return;
  demote(run, fmt::format(
                  "run.json says complete, but metrics.jsonl holds {} of the {} steps it promises "
                  "({}); the run directory was cut short or edited: rerun the producer",
                  recorded, promised,
                  recorded == 0 ? std::string("no step at all")
                                : fmt::format("recorded steps {}..{}", run.steps.front().step,
                                              run.steps.back().step)));
}

bool is_import(const RunInfo& info) { return info.producer.rfind("import:", 0) == 0; }

// The files a producer writes at its case's record steps (StepRecorder); none where the run is
// not held to them, or its case's text does not read as a case (nothing can be said of it then;
// the comparison says so where it needs the case).
std::vector<fs::path> promised_tensor_files(const RunDir& run) {
  if (run.info.schema_version < 3 || is_import(run.info) || run.info.case_toml.empty()) return {};
  CaseSpec spec;
  try {
    spec = case_from_text(run.info.case_toml, run.dir / "run.json (case.toml)");
  } catch (const InputError&) {
    return {};
  }
  const std::vector<int64_t>& steps = spec.train.record_steps;
  std::vector<fs::path> files;
  for (int64_t step : steps) files.push_back(step_tensors_path(run.dir, step));
  if (!steps.empty() && records_intermediates(spec.model)) {
    files.push_back(intermediates_path(run.dir, steps.front()));
  }
  return files;
}

void demote_if_tensor_files_missing(RunDir& run) {
  if (run.info.status != "complete") return;
  const std::vector<fs::path> promised = promised_tensor_files(run);
  std::vector<std::string> missing;
  for (const fs::path& file : promised) {
    std::error_code error;
    if (!fs::is_regular_file(file, error)) missing.push_back("tensors/" + file.filename().string());
  }
  if (missing.empty()) return;
  demote(run,
         fmt::format("run.json says complete, but {} of the {} tensor files its case's "
                     "train.record_steps promise {} missing ({}); the run directory was cut short "
                     "or edited: rerun the producer",
                     missing.size(), promised.size(), missing.size() == 1 ? "is" : "are",
                     fmt::join(missing, ", ")));
}

}  // namespace

void hold_to_promises(RunDir& run) {
  refuse_more_steps_than_promised(run);
  demote_if_steps_missing(run);
  demote_if_tensor_files_missing(run);
}

}  // namespace parity
