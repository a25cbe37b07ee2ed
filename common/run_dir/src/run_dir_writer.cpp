// RunDirWriter: a producer's run directory, written as it trains.
#include "parity/common/run_dir.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "metrics_jsonl.h"
#include "parity/common/error.h"
#include "parity/common/output_path.h"
#include "parity/common/rng_streams.h"
#include "parity/common/tensor_file.h"
#include "parity/common/utc_timestamp.h"
#include "run_dir_files.h"
#include "run_json.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

}  // namespace

void write_text_file_atomically(const fs::path& path, const std::string& text) {
  const std::string failure = replace_file_without_following_links(path, text);
  if (!failure.empty()) throw RunError("cannot write " + path.string() + ": " + failure);
}

RunDirWriter::RunDirWriter(std::filesystem::path dir, RunInfo info, bool overwrite)
    : dir_(std::move(dir)),
      lock_(std::make_unique<DirectoryLock>(dir_, info.producer + " run of case " + info.case_name)),
      info_(std::move(info)) {
  if (fs::exists(dir_ / kRunJson)) {
    if (!overwrite) {
      throw InputError("run directory " + dir_.string() +
                       " already holds a run (run.json exists); choose a new directory or allow "
                       "overwriting it");
    }
    // The old run's steps and tensors must not mix with the new ones; run.json is replaced below.
    std::error_code error;
    fs::remove(dir_ / kMetricsJsonl, error);
    if (!error) fs::remove(rng_streams_path(dir_), error);
    if (!error) fs::remove_all(dir_ / kTensorsDir, error);
    if (error) {
      throw InputError("cannot clear the old run in " + dir_.string() + ": " + error.message());
    }
  }
  std::error_code error;
  fs::create_directories(dir_ / kTensorsDir, error);
  if (error) {
    throw InputError("cannot create run directory " + (dir_ / kTensorsDir).string() + ": " +
                     error.message());
  }
  // metrics.jsonl exists before run.json does, so a reader that finds run.json finds both.
  // A stream follows links: one planted in the folder (metrics.jsonl -> /etc/passwd) is refused.
  check_output_file(dir_ / kMetricsJsonl, "run file", /*overwrite=*/true);
  metrics_.open(dir_ / kMetricsJsonl, std::ios::binary | std::ios::trunc);
  if (!metrics_) {
    throw InputError("cannot create " + (dir_ / kMetricsJsonl).string() + ": " +
                     std::strerror(errno));
  }
  info_.schema_version = kRunSchemaVersion;
  info_.status = "running";
  info_.failure.clear();
  if (info_.started_at.empty()) info_.started_at = utc_timestamp_now();
  write_run_json();
  on_stop_ = std::make_unique<TerminationAction>([this](const std::string& reason) {
    try {
      mark_incomplete(reason);
    } catch (const std::exception&) {
      // The disk may be what failed; the process ends either way, and run.json says "running".
    }
  });
}

RunDirWriter::~RunDirWriter() {
  // A producer that said neither finish() nor why it stopped is being unwound by an error.
  try {
    mark_incomplete("the producer stopped on an error before the end (its error output says "
                    "which)");
  } catch (const std::exception&) {
    // Nothing more can be done from a destructor; run.json keeps saying "running".
  }
}

void RunDirWriter::append_step(const StepMetrics& metrics) {
  // One write per line, flushed at once: a killed producer loses at most the line in flight.
  const std::string line =
      step_metrics_to_json(metrics).dump(-1, ' ', false, Json::error_handler_t::replace);
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_ << line << '\n';
  metrics_.flush();
  if (!metrics_) {
    throw RunError("writing step " + std::to_string(metrics.step) + " to " +
                   (dir_ / kMetricsJsonl).string() + " failed: " + std::strerror(errno));
  }
}

void RunDirWriter::append_rng_draws(const std::vector<MaskDraw>& draws) {
  if (draws.empty()) return;
  const fs::path path = rng_streams_path(dir_);
  if (!rng_.is_open()) {
    check_output_file(path, "run file", /*overwrite=*/true);
    rng_.open(path, std::ios::binary | std::ios::trunc);
    if (!rng_) throw RunError("cannot create " + path.string() + ": " + std::strerror(errno));
  }
  std::string lines;
  for (const MaskDraw& draw : draws) lines += mask_draw_to_json_line(draw) + '\n';
  rng_ << lines;
  rng_.flush();
  if (!rng_) {
    throw RunError("writing step " + std::to_string(draws.front().step) + "'s RNG streams to " +
                   path.string() + " failed: " + std::strerror(errno));
  }
}

void RunDirWriter::write_tensors(int64_t step, const NamedTensors& tensors) {
  write_safetensors(step_tensors_path(dir_, step), tensors,
                    {{"step", std::to_string(step)}, {"producer", info_.producer}});
}

void RunDirWriter::write_intermediates(int64_t step, const NamedTensors& tensors) {
  write_safetensors(intermediates_path(dir_, step), tensors,
                    {{"step", std::to_string(step)}, {"producer", info_.producer}});
}

void RunDirWriter::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_.flush();
  info_.status = "complete";
  info_.failure.clear();
  write_run_json();
}

void RunDirWriter::mark_incomplete(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (info_.status != "running") return;  // the first reason stands; a stop after the end is none
  metrics_.flush();  // keep every step written so far
  info_.status = "incomplete";
  info_.failure = why;
  write_run_json();
}

void RunDirWriter::write_run_json() const {
  const std::string text =
      run_info_to_json(info_).dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  write_text_file_atomically(dir_ / kRunJson, text);
}

}  // namespace parity
