// The case file's schema: every section and key, each spelled once here, with the rule the
// checker applies to its value. A key's type is the type of its CaseSpec field and its default
// is that field's initializer (case_spec.h); for_each_case_key() binds each key to its field, in
// canonical order (the order to_toml() prints). docs/case-schema.md documents every key.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "parity/common/case_limits.h"
#include "parity/common/case_spec.h"

namespace parity::case_schema {

struct Section {
  std::string_view name;
  bool hashed;  // part of what is trained: CaseSpec::training_toml() and hash() hold it
};

enum class FloatRange { kAny, kPositive, kNonNegative, kUnitInterval };

// What the checker requires of a key's value beyond its type. Seeds (uint64_t fields) are
// refused below 0 by the reader, the rules of [scenario] and model.widths by the checker.
struct Rule {
  const std::vector<std::string>* one_of = nullptr;         // string keys: the allowed values
  int64_t min = std::numeric_limits<int64_t>::min();        // integer keys
  int64_t max = std::numeric_limits<int64_t>::max();
  FloatRange range = FloatRange::kAny;                      // float keys (always finite)
};

Rule one_of(const std::vector<std::string>& allowed);
Rule at_least(int64_t min);
Rule between(int64_t min, int64_t max);
Rule in_range(FloatRange range);

struct Key {
  const Section& section;
  std::string_view name;
  Rule rule = {};
  std::string help = {};  // why the rule holds (or what the key is), for errors that need it
  // A key added after cases were hashed is left out of the canonical text while it holds its
  // default (its CaseSpec field's initial value), so that the cases that do not use it keep
  // their hash.
  bool written_when_default = true;

  std::string dotted() const;  // "train.lr"
};

inline const Section kCase{"case", true};
inline const Section kModel{"model", true};
inline const Section kData{"data", true};
inline const Section kParallel{"parallel", true};
inline const Section kTrain{"train", true};
inline const Section kInit{"init", true};
inline const Section kRng{"rng", true};
inline const Section kJax{"jax", true};
inline const Section kCompare{"compare", false};
inline const Section kScenario{"scenario", false};

inline const std::vector<std::string> kActivations = {"tanh", "relu", "gelu"};
inline const std::vector<std::string> kLosses = {"softmax_cross_entropy", "mse"};
inline const std::vector<std::string> kLabelSmoothingForms = {"uniform", "flax_examples"};
inline const std::vector<std::string> kDatasets = {"fashion-mnist", "synthetic-linear"};
inline const std::vector<std::string> kOptimizers = {"sgd", "adam", "adamw", "rmsprop",
                                                     "adagrad"};
inline const std::vector<std::string> kDtypes = {"f32", "bf16", "f16"};
inline const std::vector<std::string> kClipPlacements = {"after_mean", "before_mean"};
// "torch" is made by ddp_ref (LibTorch's constructors), the others by common/ (init_params.h).
inline const std::vector<std::string> kInitSchemes = {"jax-normal", "flax", "torch"};

inline const Key kCaseName{kCase, "name"};
inline const Key kCaseDescription{kCase, "description"};

inline const Key kModelWidths{
    kModel, "widths", {},
    "the layer widths from input to output, for example widths = [784, 256, 10]"};
inline const Key kModelInput{
    kModel, "input", {},
    "one sample's shape, NHWC without N, for a layers model: for fashion-mnist [28, 28, 1] "
    "(images) or [784] (flat rows)",
    false};
inline const Key kModelLayers{kModel, "layers", {}, "the model's layers (docs/model-layers.md)",
                              false};
inline const Key kModelActivation{kModel, "activation", one_of(kActivations)};
inline const Key kModelLoss{kModel, "loss", one_of(kLosses)};
// Added after the cases were hashed: a case without smoothing keeps its hash.
inline const Key kModelLabelSmoothing{
    kModel, "label_smoothing", in_range(FloatRange::kUnitInterval),
    "the label smoothing epsilon of softmax_cross_entropy (0: none)", false};
inline const Key kModelLabelSmoothingForm{
    kModel, "label_smoothing_form", one_of(kLabelSmoothingForms),
    "uniform: targets (1 - eps) onehot + eps/C, loss -sum q log p (torch, optax); "
    "flax_examples: on-value 1 - eps, off-value eps/(C - 1), loss minus H(q) (KL(q || p))",
    false};

inline const Key kDataDataset{kData, "dataset", one_of(kDatasets)};
inline const Key kDataPerReplicaBatch{kData, "per_replica_batch", at_least(1)};
inline const Key kDataSeed{kData, "seed"};
inline const Key kDataShuffle{kData, "shuffle"};
inline const Key kDataDropLast{kData, "drop_last"};
inline const Key kDataSyntheticNumSamples{kData, "synthetic_num_samples", at_least(1)};
inline const Key kDataSyntheticSeed{kData, "synthetic_seed"};
// Added after the cases were hashed: a case with centred-as-read inputs keeps its hash.
inline const Key kDataFeatureOffset{
    kData, "feature_offset", {},
    "a constant added to every input feature (fashion-mnist: pixel / 255 + offset)", false};

inline const Key kParallelReplicas{
    kParallel, "replicas", between(1, kMaxCaseReplicas),
    "ddp_ref runs each rank as a thread and meters its memory in one of " +
        std::to_string(kMaxCaseReplicas) + " per-rank slots"};
inline const Key kParallelProcesses{kParallel, "processes", at_least(1)};
inline const std::vector<std::string> kParallelStyles = {"pmap", "jit-dp", "jit-fsdp"};
// Added after the cases were hashed: a case that keeps pmap keeps its hash.
inline const Key kParallelStyle{
    kParallel, "style", one_of(kParallelStyles),
    "how the engine spreads the step: pmap (a step per device, gradients pmean'd), jit-dp (jit "
    "over the global batch, params and optimizer state replicated), jit-fsdp (jit, params and "
    "optimizer state sharded over the devices)",
    false};

inline const Key kTrainSteps{
    kTrain, "steps", between(1, kMaxCaseSteps),
    "a cap so that every run ends: " + std::to_string(kMaxCaseSteps) +
        " steps take about 3 hours at 1 ms a step, and each writes a line of metrics.jsonl"};
inline const Key kTrainOptimizer{kTrain, "optimizer", one_of(kOptimizers)};
inline const Key kTrainLr{kTrain, "lr", in_range(FloatRange::kPositive)};
inline const Key kTrainMomentum{kTrain, "momentum", in_range(FloatRange::kUnitInterval)};
inline const Key kTrainNesterov{kTrain, "nesterov"};
inline const Key kTrainWeightDecay{kTrain, "weight_decay", in_range(FloatRange::kNonNegative)};
inline const Key kTrainBeta1{kTrain, "beta1", in_range(FloatRange::kUnitInterval)};
inline const Key kTrainBeta2{kTrain, "beta2", in_range(FloatRange::kUnitInterval)};
// torch and optax both accept eps = 0.
inline const Key kTrainEps{kTrain, "eps", in_range(FloatRange::kNonNegative)};
inline const Key kTrainEpsRoot{kTrain, "eps_root", in_range(FloatRange::kNonNegative)};
// Keys added after cases were hashed: written only where a case sets them.
inline const Key kTrainRmsDecay{kTrain, "rms_decay", in_range(FloatRange::kUnitInterval),
                                "rmsprop's second-moment decay: torch's alpha, optax's decay",
                                false};
inline const Key kTrainInitialAccumulatorValue{
    kTrain, "initial_accumulator_value", in_range(FloatRange::kNonNegative),
    "adagrad's starting sum of squared gradients", false};
inline const Key kTrainEpsInSqrt{
    kTrain, "eps_in_sqrt", {},
    "rmsprop and adagrad only: eps inside the square root (optax's default) or after it "
    "(torch.optim's form); Adam's counterpart is eps_root",
    false};
inline const Key kTrainClipGradNorm{kTrain, "clip_grad_norm", in_range(FloatRange::kNonNegative)};
inline const Key kTrainClipPlacement{kTrain, "clip_placement", one_of(kClipPlacements), "", false};
inline const Key kTrainGradAccumSteps{kTrain, "grad_accum_steps", at_least(1)};
inline const Key kTrainDtype{kTrain, "dtype", one_of(kDtypes)};
inline const Key kTrainRecordSteps{kTrain, "record_steps"};

inline const Key kInitScheme{kInit, "scheme", one_of(kInitSchemes)};
inline const Key kInitSeed{kInit, "seed"};
inline const Key kInitScale{kInit, "scale", in_range(FloatRange::kPositive)};

inline const std::vector<std::string> kRngDerivations = {"fold_in", "split", "none"};
inline const std::vector<std::string> kRngDdpStreams = {"threefry", "torch"};
inline const std::vector<std::string> kRngTorchSeeds = {"seed+rank", "seed"};
inline const Key kRngSeed{kRng, "seed", {}, "the root key's seed", false};
inline const Key kRngPerStep{kRng, "per_step", one_of(kRngDerivations), "", false};
inline const Key kRngPerDevice{kRng, "per_device", one_of(kRngDerivations), "", false};
inline const Key kRngDdp{kRng, "ddp", one_of(kRngDdpStreams), "", false};
inline const Key kRngTorchSeed{kRng, "torch_seed", one_of(kRngTorchSeeds), "", false};

inline const Key kJaxVersion{kJax, "version", one_of(pmap_engine::jax_release_names()),
                             "the JAX release pmap_engine models", false};

inline const Key kCompareOracle{kCompare, "oracle"};
inline const Key kCompareTensorRtol{kCompare, "tensor_rtol", in_range(FloatRange::kNonNegative)};
inline const Key kCompareTensorAtol{kCompare, "tensor_atol", in_range(FloatRange::kNonNegative)};
inline const Key kCompareSeedKeys{
    kCompare, "seed_keys", {},
    "the seeds parity run --seeds varies, each of \"rng.seed\", \"data.seed\", \"init.seed\" "
    "at most once",
    false};
inline const Key kCompareSeedsLossMargin{kCompare, "seeds_loss_margin",
                                         in_range(FloatRange::kPositive), "", false};
inline const Key kCompareSeedsAccuracyMargin{kCompare, "seeds_accuracy_margin",
                                             in_range(FloatRange::kPositive), "", false};

inline const Key kScenarioId{kScenario, "id"};
inline const Key kScenarioTitle{kScenario, "title"};
inline const Key kScenarioSource{kScenario, "source"};
inline const Key kScenarioClaim{kScenario, "claim"};
inline const Key kScenarioVerdict{kScenario, "verdict"};
inline const Key kScenarioFactCheck{kScenario, "fact_check"};
inline const Key kScenarioExpect{kScenario, "expect"};
inline const Key kScenarioExpectDiagnoses{kScenario, "expect_diagnoses"};
inline const Key kScenarioExpectError{kScenario, "expect_error"};
inline const Key kScenarioExpectErrorByRelease{kScenario, "expect_error_by_release"};
inline const Key kScenarioExpectFigures{kScenario, "expect_figures"};
inline const Key kScenarioMissing{kScenario, "missing"};
inline const Key kScenarioEngineProgram{kScenario, "engine_program"};
inline const Key kScenarioEngineOverrides{
    kScenario, "engine_overrides", {},
    "section.key=value overrides, as --set takes them, that only the engine trains with", false};
inline const Key kScenarioReference{kScenario, "reference"};
inline const Key kScenarioQuick{kScenario, "quick"};

// Calls visit(key, field) for every key of the case file, in canonical order; `Spec` is
// CaseSpec or const CaseSpec.
template <typename Spec, typename Visit>
void for_each_case_key(Spec& spec, Visit&& visit) {
  visit(kCaseName, spec.name);
  visit(kCaseDescription, spec.description);
  visit(kModelWidths, spec.model.widths);
  visit(kModelInput, spec.model.input);
  visit(kModelLayers, spec.model.layers);
  visit(kModelActivation, spec.model.activation);
  visit(kModelLoss, spec.model.loss);
  visit(kModelLabelSmoothing, spec.model.label_smoothing);
  visit(kModelLabelSmoothingForm, spec.model.label_smoothing_form);
  visit(kDataDataset, spec.data.dataset);
  visit(kDataPerReplicaBatch, spec.data.per_replica_batch);
  visit(kDataSeed, spec.data.seed);
  visit(kDataShuffle, spec.data.shuffle);
  visit(kDataDropLast, spec.data.drop_last);
  visit(kDataSyntheticNumSamples, spec.data.synthetic_num_samples);
  visit(kDataSyntheticSeed, spec.data.synthetic_seed);
  visit(kDataFeatureOffset, spec.data.feature_offset);
  visit(kParallelReplicas, spec.parallel.replicas);
  visit(kParallelProcesses, spec.parallel.processes);
  visit(kParallelStyle, spec.parallel.style);
  visit(kTrainSteps, spec.train.steps);
  visit(kTrainOptimizer, spec.train.optimizer);
  visit(kTrainLr, spec.train.lr);
  visit(kTrainMomentum, spec.train.momentum);
  visit(kTrainNesterov, spec.train.nesterov);
  visit(kTrainWeightDecay, spec.train.weight_decay);
  visit(kTrainBeta1, spec.train.beta1);
  visit(kTrainBeta2, spec.train.beta2);
  visit(kTrainEps, spec.train.eps);
  visit(kTrainEpsRoot, spec.train.eps_root);
  visit(kTrainRmsDecay, spec.train.rms_decay);
  visit(kTrainInitialAccumulatorValue, spec.train.initial_accumulator_value);
  visit(kTrainEpsInSqrt, spec.train.eps_in_sqrt);
  visit(kTrainClipGradNorm, spec.train.clip_grad_norm);
  visit(kTrainClipPlacement, spec.train.clip_placement);
  visit(kTrainGradAccumSteps, spec.train.grad_accum_steps);
  visit(kTrainDtype, spec.train.dtype);
  visit(kTrainRecordSteps, spec.train.record_steps);
  visit(kInitScheme, spec.init.scheme);
  visit(kInitSeed, spec.init.seed);
  visit(kInitScale, spec.init.scale);
  visit(kRngSeed, spec.rng.seed);
  visit(kRngPerStep, spec.rng.per_step);
  visit(kRngPerDevice, spec.rng.per_device);
  visit(kRngDdp, spec.rng.ddp);
  visit(kRngTorchSeed, spec.rng.torch_seed);
  visit(kJaxVersion, spec.jax.version);
  visit(kCompareOracle, spec.compare.oracle);
  visit(kCompareTensorRtol, spec.compare.tensor_rtol);
  visit(kCompareTensorAtol, spec.compare.tensor_atol);
  visit(kCompareSeedKeys, spec.compare.seed_keys);
  visit(kCompareSeedsLossMargin, spec.compare.seeds_loss_margin);
  visit(kCompareSeedsAccuracyMargin, spec.compare.seeds_accuracy_margin);
  visit(kScenarioId, spec.scenario.id);
  visit(kScenarioTitle, spec.scenario.title);
  visit(kScenarioSource, spec.scenario.source);
  visit(kScenarioClaim, spec.scenario.claim);
  visit(kScenarioVerdict, spec.scenario.verdict);
  visit(kScenarioFactCheck, spec.scenario.fact_check);
  visit(kScenarioExpect, spec.scenario.expect);
  visit(kScenarioExpectDiagnoses, spec.scenario.expect_diagnoses);
  visit(kScenarioExpectError, spec.scenario.expect_error);
  visit(kScenarioExpectErrorByRelease, spec.scenario.expect_error_by_release);
  visit(kScenarioExpectFigures, spec.scenario.expect_figures);
  visit(kScenarioMissing, spec.scenario.missing);
  visit(kScenarioEngineProgram, spec.scenario.engine_program);
  visit(kScenarioEngineOverrides, spec.scenario.engine_overrides);
  visit(kScenarioReference, spec.scenario.reference);
  visit(kScenarioQuick, spec.scenario.quick);
}

// A key's TOML type, from its field's C++ type.
enum class Kind { kString, kInteger, kFloat, kBool, kIntegerList, kStringList, kLayerList };

struct KeyEntry {
  const Key* key;
  Kind kind;
};

struct SectionEntry {
  const Section* section;
  std::vector<KeyEntry> keys;
};

// The sections and their keys in canonical order; nullptr when there is no such name.
const std::vector<SectionEntry>& sections();
const SectionEntry* find_section(std::string_view name);
const KeyEntry* find_key(const SectionEntry& section, std::string_view name);
std::vector<std::string> section_names();
std::vector<std::string> key_names(const SectionEntry& section);

}  // namespace parity::case_schema
