// The checks of compare_runs, one per file, and what they share: the two runs lined up step by
// step (RunPair) and the facts the diagnosis rules read (Findings), filled by the checks that
// measure them so no rule re-derives a figure from a check's text.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gradient_signal.h"
#include "rounding_growth.h"
#include "output_relations.h"
#include "parity/common/case_spec.h"
#include "parity/common/layer_intermediates.h"
#include "parity/common/run_dir.h"
#include "parity/compare/compare.h"
#include "parity/compare/result.h"
#include "tensor_scan.h"

namespace parity::compare {

// One step both runs recorded in metrics.jsonl.
struct StepPair {
  const StepMetrics* a = nullptr;
  const StepMetrics* b = nullptr;
  int64_t step() const { return a->step; }
};

struct RunPair {
  const RunDir& a;
  const RunDir& b;
  std::vector<StepPair> common;  // steps in both, in order
  std::vector<int64_t> only_a;   // steps in A's metrics only
  std::vector<int64_t> only_b;
};

RunPair pair_runs(const RunDir& a, const RunDir& b);

// Replicas of one run whose parameter digests differ from the majority's at a recorded step.
struct ReplicaDivergence {
  std::string run;  // "A" / "B"
  int64_t step = 0;
  std::vector<int64_t> replicas;
};

// The first non-finite loss or gradient of one run.
struct NonFinite {
  std::string run;
  int64_t step = 0;
  std::string what;  // "the loss is NaN", "replica 3's loss is inf", "the run stopped: ..."
};

// The global gradient norm ratio A/B at the first step where both runs have it.
struct NormRatio {
  int64_t step = 0;
  double ratio = 1;
  std::string source;  // "recorded gradients" / "metrics grad_norm"
};

// The first layer output, in forward order, whose values differ between the runs beyond the
// tensor tolerance at the first step both recorded layer outputs (layer_outputs_check.cpp;
// docs/run-dir-format.md), with what tells its cause: whether what it read agreed, and how the
// two outputs relate. Both outputs: read_step_intermediates(run.dir, step), tensor
// kIntermediatesGroup + path.
struct DivergingLayer {
  int64_t step = 0;
  std::string path;  // "03_gelu", "05_residual/sum" (layer_intermediates.h)
  std::string kind;  // the layer's kind; "residual" for a sum
  std::string module;                   // whose parameters it applies (LayerIntermediate)
  std::array<int64_t, 2> strides{1, 1};  // a window's (conv, pools)
  Shape shape;       // [batch, ...], Flax's layout
  // What the layer read ("input" for the batch), all within tolerance or not, and the largest
  // |A - B| among them.
  std::vector<std::string> inputs;
  bool inputs_agree = true;
  double input_max_abs = 0;
  std::string not_compared;        // why the outputs could not be compared (shapes, a missing one)
  double max_abs = 0;              // max |A - B|
  double rel_l2 = 0;               // ||A - B|| / ||B||
  std::optional<GridShift> shift;  // an image output (conv, pools, ...)
  std::optional<RowRatios> row_ratios;  // a layer_norm or batch_norm output
};

struct Findings {
  int64_t replicas = 0;                        // of run A (the case's parallel.replicas)
  std::optional<int64_t> first_loss_mismatch;  // first step outside the loss tolerance
  std::optional<NormRatio> grad_norm_ratio;
  // Whether the reduced gradients, and the parameters after the update, at the first step both
  // recorded tensors (usually 0) all matched.
  std::optional<bool> first_grads_match;
  std::optional<bool> first_params_match;
  // The oracle judged the recorded tensors and found none of A's beyond its band: A's tensors
  // differ from B's by rounding, even where they missed the tolerance at the first step.
  bool oracle_vouches_for_tensors = false;
  std::optional<int64_t> first_tensor_mismatch;  // gradients, parameters or model state
  std::vector<ReplicaDivergence> divergences;    // at most one per run
  std::optional<int64_t> first_sample_mismatch;
  // The first step at which one run repeats more samples within its global batch than the
  // other: devices fed the same samples (P8).
  struct DuplicateExcess {
    int64_t step = 0;
    char run = 'A';  // the run with more repeats
    int64_t repeats = 0, other_repeats = 0;
  };
  std::optional<DuplicateExcess> first_duplicate_excess;
  std::optional<NonFinite> first_non_finite;  // the earlier of both runs'
  // RNG streams (rng_check.cpp): the first replicas of one run that drew identical masks, and
  // the first mask a replica drew again at a later step. `keyed`: the run records jax.random
  // keys (threefry), so the cause is a key; otherwise a generator's seed (torch).
  struct SharedMasks {
    char run = 'A';
    int64_t step = 0;
    std::string site;
    std::vector<int64_t> replicas;
    int64_t elements = 0;             // compared per pair (the recorded prefix)
    double expected_agreement = 0;    // of independent draws
    bool keyed = false;
  };
  std::optional<SharedMasks> shared_replica_masks;
  struct RepeatedMask {
    char run = 'A';
    std::string site;
    int64_t replica = 0;
    int64_t step = 0;
    int64_t first_step = 0;  // the step that drew it first
    bool keyed = false;
  };
  std::optional<RepeatedMask> repeated_mask;
  std::optional<DivergingLayer> first_diverging_layer;
};

Check check_case(const RunPair& runs, const CompareOptions& options);
Check check_loss_curve(const RunPair& runs, const Tolerance& tolerance, StepSeries& series,
                       Findings& findings);
// The gradients and parameters checks, from the recorded tensors; the tensors of parameters
// without gradient signal are listed and not judged.
Check check_gradients(const TensorScan& scan, const Tolerance& tolerance,
                      const GradientSignal& signal, Findings& findings);
Check check_parameters(const TensorScan& scan, const Tolerance& tolerance,
                       const GradientSignal& signal, Findings& findings);
// The model state check (BatchNorm's running statistics), like parameters; nullopt when neither
// run recorded model state (a model without BatchNorm).
std::optional<Check> check_model_state(const TensorScan& scan, const Tolerance& tolerance,
                                       Findings& findings);
// The case a run's run.json holds, overrides applied; nullopt for a run without one (an import)
// or whose text does not read as a case.
std::optional<CaseSpec> recorded_case(const RunDir& run);
// The layer outputs a run records, from the case its run.json holds (its layers, their paths,
// modules and windows; never a default's value); empty for a run without them (a widths model,
// an import, a BatchNorm that syncs).
std::vector<LayerIntermediate> recorded_layers(const RunDir& run);
// The layer outputs at the first step both runs recorded them (first_diverging_layer); nullopt
// when neither run recorded any (a widths model, an import).
std::optional<Check> check_layer_outputs(const RunPair& runs, const Tolerance& tolerance,
                                         Findings& findings);
Check check_replicas(const TensorScan& scan, Findings& findings);
Check check_data(const RunPair& runs, Findings& findings);
Check check_rng(const RunPair& runs, Findings& findings);
// `dtype_tolerance`: the runs' default loss tolerance, the oracle's floor unless one is given.
// The recorded tensors against the oracle's (tensor_oracle.cpp): how many tensors and how many
// groups (grads, params, batch_stats at a step) were judged, and, one line each, the groups
// whose worst tensor of A is further from the oracle than factor x B's worst.
// Relative L2 0.5: the reference's worst tensor is at least 29 degrees off the oracle's
// direction (equal norms: r = 2 sin(theta / 2)), a third of the way to the sqrt(2) of
// unrelated tensors; errors there are no longer small against the values they perturb.
inline constexpr double kTensorOracleHorizon = 0.5;
// The confidence with which the tensor band allows for a small tensor's chance rounding
// (tensor_oracle.cpp): one group-step in a thousand of two equally accurate runs falls outside.
inline constexpr double kSamplingConfidence = 0.999;

struct TensorOracleJudgement {
  size_t judged = 0;
  size_t without_signal = 0;  // tensors of A left out: parameters without gradient signal
  size_t groups = 0;
  std::vector<std::string> beyond;
  // Group-steps past the predictability horizon (tensor_oracle.cpp): not judged.
  std::vector<std::string> past_horizon;
};
// A group's worst tensor of A may reach band x the group's sampling spread x B's worst; the
// tensors of parameters without gradient signal are not judged.
TensorOracleJudgement judge_tensors_against_oracle(const RunDir& a, const RunDir& b,
                                                   const RunDir& oracle,
                                                   const Tolerance& tolerance, double band,
                                                   const GradientSignal& signal);

// Why `oracle` cannot judge the runs, or nullopt when it can. An oracle is a run like any other:
// one that is incomplete, or lacks a step the runs both recorded or the tensors they both
// recorded at a step, would judge them on what it has (one step of twenty passes a run that
// parts at the third), so the comparison refuses it and is incomplete.
std::optional<std::string> oracle_shortfall(const RunPair& runs, const RunDir& oracle);
// The Oracle check of a comparison whose oracle was refused: not recorded, saying why.
Check refused_oracle_check(const std::string& why);
// `growth`: the runs' rounding growth (rounding_growth.h), which widens the oracle's factor;
// `tensors`: the judgement of the recorded tensors, when the oracle recorded some.
Check check_oracle(const RunPair& runs, const CompareOptions& options,
                   const Tolerance& dtype_tolerance, const RoundingGrowth& growth,
                   const std::optional<TensorOracleJudgement>& tensors);
// A performance check's warning, or a failure when the caller gates on performance
// (CompareOptions::fail_on_performance).
CheckStatus warning_status(const CompareOptions& options);
// Global batch / steady step median; nullopt without timings or a case to read the batch from.
std::optional<double> samples_per_second(const RunDir& run);
// The gate's statistical throughput verdict (options.speed, speed_verdict.h): A is the
// candidate, B the baseline. nullopt when not asked for, or when A or B (asked with no reruns)
// recorded no per-step times; InputError when a rerun recorded none.
std::optional<SpeedInterval> judge_speed_of(const RunPair& runs, const CompareOptions& options);
// `speed`: that verdict, which then decides the check instead of the two medians.
Check check_throughput(const RunPair& runs, const CompareOptions& options,
                       const std::optional<SpeedInterval>& speed);
// The largest per-replica peak of each run, judged, and what each replica holds between steps
// (parameters and optimizer state), stated side by side when both runs recorded it.
Check check_memory(const RunPair& runs, const CompareOptions& options);

// The first non-finite loss, replica loss or gradient norm in either run's metrics (a NaN or
// infinite gradient element makes grad_norm non-finite too); the earlier step, A on a tie.
std::optional<NonFinite> find_first_non_finite(const RunPair& runs);

// The diagnosis rules (diagnosis.cpp), most fundamental cause first.
std::vector<Diagnosis> diagnose(const RunPair& runs, const Findings& findings);
// Only the rules on RNG streams (P5 and R1: replicas sharing masks; R2: a reused stream), for
// runs that are not compared step by step (seed sets).
std::vector<Diagnosis> diagnose_rng_streams(const Findings& findings);

// What the reports show of one run, labelled "A" or "B".
RunSummary summarize_run(const std::string& label, const RunDir& run);

}  // namespace parity::compare
