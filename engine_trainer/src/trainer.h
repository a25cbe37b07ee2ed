// One engine process's training loop, shaped like ddp_ref's RankTrainer: the step as a JAX user
// runs it (the mapped train_step on this process's devices), with the run directory's
// metrics gathered on the way.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <optional>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/dropout_streams.h"
#include "parity/common/rng_streams.h"
#include "parity/common/run_dir.h"
#include "parity/common/step_recorder.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "process_session.h"
#include "step_inputs.h"
#include "step_plan.h"
#include "step_signature.h"

namespace parity::engine_trainer {

class EngineTrainer {
 public:
  // Reads the init file and the training data and compiles the step for this process's
  // devices; writes nothing. `plan` is the case's, for options.step.
  EngineTrainer(const EngineRunPlan& plan, const EngineOptions& options,
                const ProcessSession& process, std::chrono::steady_clock::time_point run_start);

  // Trains to the end. `writer` is process 0's run directory (null elsewhere), owned by the
  // caller so that a failure can still be recorded in it.
  ProducerSummary run(RunDirWriter* writer);

 private:
  void resume_from_checkpoint(int64_t step);
  StepRecord reduce_metrics(int64_t step, const StepInputs& batch, const pe::Tree& step_loss) const;
  std::vector<uint64_t> replica_param_digests() const;
  void record_step(StepRecord& record, const pe::Tree& step_grads,
                   const std::vector<uint64_t>& digests) const;
  void record_intermediates(int64_t step, const StepInputs& batch) const;
  void report_progress(int64_t step, double loss) const;
  ProducerSummary finish(double setup_seconds);
  std::map<std::string, double> evaluate() const;
  pe::Array test_outputs(const pe::Tree& params, const pe::Array& x) const;
  const StepLayout& layout() const;
  // Device d's parameters, optimizer state and batch statistics (the one value under jit).
  pe::Tree device_params(int64_t d) const;
  pe::Tree device_opt_state(int64_t d) const;
  pe::Tree device_batch_stats(int64_t d) const;
  MemoryReport memory_report(const std::vector<double>& peaks) const;
  StepArguments step_arguments(const StepInputs& batch, int64_t step);
  pe::Array next_dropout_key(int64_t step);
  std::vector<MaskDraw> dropout_draws(int64_t step, const pe::Tree& draws) const;

  const EngineRunPlan& plan_;
  const CaseSpec& spec_;
  const StepSignature& signature_;
  const EngineOptions& options_;
  const ProcessSession& process_;
  std::optional<StepRecorder> recorder_;  // from run() on
  std::chrono::steady_clock::time_point run_start_;
  int64_t num_devices_;  // every process's; halved by a checkpoint resume (S10)
  Dataset train_;
  std::optional<Placement> placement_;
  // In the step's layout (StepLayout::stacked_state): every leaf with the device axis, as
  // jax.device_put_replicated makes it, or one tree (params broadcast with in_axes=None; a
  // jit's global arrays).
  pe::Tree params_;
  pe::Tree opt_state_;
  // A layers model's BatchNorm statistics, per device (they drift apart unless a BatchNorm
  // syncs them); widths models have no model state.
  pe::Tree batch_stats_;
  // A model with dropout: the step keys.
  DropoutKeys dropout_keys_;
  std::vector<double> step_seconds_;
  int64_t peak_bytes_per_device_ = 0;  // of the placements before the current one
  int64_t compile_count_ = 0;          // likewise
  double global_loss_ = 0;
};

}  // namespace parity::engine_trainer
