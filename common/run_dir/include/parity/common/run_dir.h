// The run directory: the one contract between producers (ddp_ref, pmap_engine, importers) and
// the comparison harness. Layout (docs/run-dir-format.md):
//   run.json        RunInfo, schema versioned, rewritten atomically at start and at the end
//   metrics.jsonl   one StepMetrics object per line, appended and flushed every step
//   tensors/        step_NNNNNN.safetensors at the case's record steps; a layers model's layer
//                   outputs at the first of them, intermediates_NNNNNN.safetensors
//                   (layer_intermediates.h)
//   rng.jsonl       the dropout masks' RNG streams, when the model has dropout (rng_streams.h)
// A run that did not finish keeps status "running" (the producer died) or "incomplete" (it
// failed and said why); readers never pass either off as complete.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/directory_lock.h"
#include "parity/common/host_tensor.h"
#include "parity/common/rng_streams.h"
#include "parity/common/termination.h"
#include "parity/common/utc_timestamp.h"  // utc_timestamp_now(), run.json's started_at

namespace parity {

// 2 added "steps" (the steps a run promises; optional). 3: a metrics line names its "replicas"
// when fewer than run.json's trained it, every line's replica_losses match them exactly, and a
// producer's complete run holds every tensor file its case's record steps promise. Schema 1 and
// 2 files are still read, by their own rules.
inline constexpr int kRunSchemaVersion = 3;

// The most replicas a run.json may describe: far beyond any data-parallel job (the largest
// published pmap/DDP jobs span thousands of devices), so only a damaged file is refused.
inline constexpr int64_t kMaxRunReplicas = 1 << 20;

struct StepMetrics {
  int64_t step = 0;                   // 0-based optimizer step
  double loss = 0;                    // global mean loss over all replicas' samples
  std::vector<double> replica_losses; // each replica's mean loss on its own batch
  double grad_norm = 0;               // global L2 norm of the reduced gradient
  double param_norm = 0;              // global L2 norm of the parameters after the update
  double lr = 0;
  double step_seconds = 0;
  std::string samples_digest;         // digest_sample_ids of the step's global sample ids
  std::string samples_set_digest;     // digest_sample_set of them (absent in older runs)
  // Samples of the global batch that repeat one already in it (DistributedSampler's padding
  // at an epoch's end, or devices fed the same samples: P8); absent in older runs.
  std::optional<int64_t> duplicate_samples;
  std::vector<std::string> replica_samples;  // per-replica digests, when the case asks
  // The replicas that trained this step when fewer than run.json's (a run resumed on fewer
  // devices: case S10); absent otherwise, and in runs older than schema 3.
  std::optional<int64_t> replicas;
};

struct RunTimings {
  double setup_seconds = 0;
  double first_step_seconds = 0;       // includes compilation / warm-up
  double steady_step_median_seconds = 0;
  double steady_step_spread_seconds = 0;  // interquartile range of steps after the first
  int64_t steady_steps = 0;
};

struct MemoryReport {
  std::vector<int64_t> peak_bytes_per_replica;
  std::string method;  // how it was measured, e.g. "counting CPU allocator (thread ranks)"
  // What each replica holds between steps: its parameters' and its optimizer state's bytes (a
  // sharded run holds its blocks only), and how they are laid out over the replicas ("a full
  // copy on every rank"; "jit-fsdp over 8 devices; uneven leaves replicated: dense3.bias").
  // Empty in runs that did not record them (older runs, imports).
  std::vector<int64_t> param_bytes_per_replica;
  std::vector<int64_t> optimizer_state_bytes_per_replica;
  std::string state_layout;
};

struct RunInfo {
  int schema_version = kRunSchemaVersion;
  std::string producer;    // ddp_ref | pmap_engine | import:<source>
  std::string status = "running";  // running | complete | incomplete
  std::string failure;     // why, when incomplete
  std::string case_name;
  std::string case_hash;
  std::string case_toml;   // the canonical case, overrides applied
  int64_t replicas = 0;
  int64_t processes = 1;
  // How the replicas train: "ddp" (ddp_ref), the engine's parallel.style ("pmap", "jit-dp",
  // "jit-fsdp"); empty when not said (older runs, imports).
  std::string parallel_style;
  // The steps the run promises to record in metrics.jsonl (a producer: the case's
  // train.steps; an importer: the steps it imported). A run that says "complete" but holds
  // fewer is read as incomplete. -1: not said (schema 1 files; the key is then left out).
  int64_t steps = -1;
  std::string dtype;
  std::string optimizer;
  uint64_t seed = 0;
  std::map<std::string, std::string> versions;  // "parity", "libtorch", "gloo", ...
  std::string host;
  std::string started_at;  // ISO 8601 UTC
  RunTimings timings;
  MemoryReport memory;
  std::map<std::string, double> results;  // e.g. "final_loss", "test_accuracy"
};

class RunDirWriter {
 public:
  // Creates `dir` (and tensors/), refusing a directory that already holds a run.json unless
  // `overwrite`; writes run.json with status "running".
  // Holds the folder's DirectoryLock while it lives, and marks the run incomplete when the
  // process is told to stop (termination.h).
  RunDirWriter(std::filesystem::path dir, RunInfo info, bool overwrite = false);
  ~RunDirWriter();

  const std::filesystem::path& dir() const { return dir_; }
  RunInfo& info() { return info_; }

  void append_step(const StepMetrics& metrics);  // one line, flushed
  // A step's lines of rng.jsonl (created by the first call), flushed; written before the step's
  // metrics line, so a step in metrics.jsonl has its streams.
  void append_rng_draws(const std::vector<MaskDraw>& draws);
  void write_tensors(int64_t step, const NamedTensors& tensors);
  // tensors/intermediates_NNNNNN.safetensors: the layer outputs of `step` (StepRecorder names
  // them).
  void write_intermediates(int64_t step, const NamedTensors& tensors);
  void finish();                                  // status "complete"
  void mark_incomplete(const std::string& why);   // status "incomplete", failure = why

 private:
  void write_run_json() const;

  std::filesystem::path dir_;
  std::unique_ptr<DirectoryLock> lock_;
  RunInfo info_;
  std::ofstream metrics_;
  std::ofstream rng_;
  // run.json and metrics.jsonl are written by the trainer and, on a stop signal, by the
  // termination thread (which flushes the metrics before marking the run incomplete): two
  // unguarded flushes of one stream could write its pending line twice.
  mutable std::mutex mutex_;
  std::unique_ptr<TerminationAction> on_stop_;
};

struct RunDir {
  std::filesystem::path dir;
  RunInfo info;
  std::vector<StepMetrics> steps;
  std::vector<int64_t> tensor_steps;  // steps with a tensors/step_NNNNNN.safetensors
  // steps with a tensors/intermediates_NNNNNN.safetensors (a layers model's first record step)
  std::vector<int64_t> intermediate_steps;
  std::vector<MaskDraw> rng;          // rng.jsonl, by step, site, replica; empty when none
};

// Reads and validates a run directory (schema version, required keys, types and ranges, step
// order, each step's replica losses against the replicas, no more steps than run.json
// promises). Errors name the file and the line. A run that says "complete" but lacks steps or
// tensor files it promised is returned as "incomplete", its failure naming what is missing: no
// reader takes a truncated run for a finished one.
RunDir read_run_dir(const std::filesystem::path& dir);

// For a launcher whose worker died before it could say so: marks the run in `dir` incomplete
// with `why` when its run.json still says "running". Returns whether it did. A run that already
// ended (complete, or incomplete with its own reason) is left as it is.
bool mark_run_dir_incomplete(const std::filesystem::path& dir, const std::string& why);
// The tensors recorded at `step`; InputError naming the steps recorded when there are none at
// `step`, and naming the file and both steps when its metadata says another step (a file
// renamed or copied over another: the run directory is damaged).
NamedTensors read_step_tensors(const std::filesystem::path& dir, int64_t step);
// The layer outputs recorded at `step` (tensors/intermediates_NNNNNN.safetensors: "input" and
// "intermediates/PATH"); InputError naming the steps recorded when there are none at `step`.
NamedTensors read_step_intermediates(const std::filesystem::path& dir, int64_t step);

// DIR/tensors/step_NNNNNN.safetensors, the file a run records `step`'s tensors in.
std::filesystem::path step_tensors_path(const std::filesystem::path& dir, int64_t step);
// DIR/tensors/intermediates_NNNNNN.safetensors, the file a run records `step`'s layer outputs in.
std::filesystem::path intermediates_path(const std::filesystem::path& dir, int64_t step);
// "step_000012" + suffix -> 12; nullopt for any other name (temp files, stray files).
std::optional<int64_t> step_of_tensor_file(const std::string& name, const std::string& suffix);

// The run.json fields every producer fills the same way from the case: its name, hash and
// canonical text, replicas, dtype, optimizer, init seed, host, start time, parity's version.
// processes is 1; producers add their own versions and counts.
RunInfo run_info_for_case(const CaseSpec& spec, const std::string& producer);

// Replaces `path` with `text` atomically: a temp file beside it, then a rename, so that a reader
// never sees half a file, and a link at `path` is neither written through nor replaced
// (output_path.h). RunError when it cannot be written.
void write_text_file_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace parity
