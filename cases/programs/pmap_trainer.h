// The engine-side trainer: a case's step under pmap on N devices, fed exactly the samples
// ddp_ref's ranks get, writing the same run directory as ddp_ref (producer "pmap_engine").
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "mlp_program.h"
#include "parity/common/case_spec.h"
#include "pmap_engine/pmap.h"

namespace parity::cases {

// N copies of every leaf, stacked on a new leading device axis (jax.device_put_replicated).
pe::Tree replicate(const pe::Tree& tree, int64_t num_devices);

// How a step differs from the case's plain data-parallel step.
struct PmapStepOptions {
  // The engine program (scenario_programs.h): "pmean" is the data-parallel average DDP
  // computes; the others are the documents' variants and mistakes (psum is pitfall P2, ...).
  std::string program = "pmean";
  // Every step verifies that params and opt_state are bit-identical on all devices (pmap's
  // replication check) and names the first divergent leaf and device.
  bool check_replicas = false;
  // The float64 oracle: master weights, optimizer state, inputs and every op in f64 (the case's
  // train.dtype is ignored), so its trajectory is closer to exact training than any f32 run's.
  // Params and opt_state passed to the step must then be f64.
  bool float64 = false;
};

// train_step(params, opt_state, x, y) under pmap(axis_name="data"): every argument carries a
// leading device axis; returns (params, opt_state, per-device loss, reduced grads), donating
// params and opt_state.
pe::Pmapped make_pmap_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                 const PmapStepOptions& step = {});

struct PmapRunOptions {
  std::filesystem::path init_file;
  std::filesystem::path out_dir;
  bool overwrite = false;
  bool quiet = false;
  PmapStepOptions step;
  // In a multi-process run (pmap_processes.h): how long joining the others and each exchange
  // between processes may take.
  double timeout_seconds = 60;
  // Called after each step with the number of steps done, for a caller's progress display.
  std::function<void(int64_t steps_done)> on_step;
};

struct PmapRunSummary {
  std::filesystem::path run_dir;
  double final_loss = 0;
  std::optional<double> test_accuracy;
};

// Trains the case on parallel.replicas devices and writes the run directory.
PmapRunSummary run_pmap(const CaseSpec& spec, const PmapRunOptions& options);

}  // namespace parity::cases
