#include "case_checker.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <type_traits>

#include "case_writer.h"
#include "parity/common/case_limits.h"
#include "parity/common/dropout_sites.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"
#include "parity/common/layer_search.h"
#include "parity/common/model_layers.h"
#include "parity/common/observed_figures.h"

namespace parity {

namespace {

namespace keys = case_schema;
using case_schema::FloatRange;
using case_schema::Key;

const std::vector<std::string> kExpectations = {"equivalent", "not equivalent", "error", "probe",
                                                "not supported"};
const std::vector<std::string> kReferences = {"ddp_ref", "engine"};
const std::vector<std::string> kVerdicts = {"confirmed", "refuted", "partly",
                                            "not reproducible here", "not checkable here"};

constexpr int64_t kFashionMnistFeatures = 784;
constexpr int64_t kFashionMnistClasses = 10;
constexpr int64_t kFashionMnistTrainSamples = 60000;

class CaseChecker {
 public:
  CaseChecker(const CaseSpec& spec, const KeyOrigins& origins) : spec_(spec), origins_(origins) {}

  void check_all() {
    check_rules();
    check_limits();
    check_model();
    check_label_smoothing();
    check_data();
    check_parallel();
    check_train();
    check_compare();
    check_scenario();
  }

 private:
  // Each key's own rule, one kind of rule at a time: allowed strings, integer minimums, float
  // lower bounds, float unit intervals, then integer maximums (the limits).
  void check_rules() {
    for_each_value<std::string>([&](const Key& key, const std::string& value) {
      if (key.rule.one_of != nullptr) one_of(key, value, *key.rule.one_of);
    });
    for_each_value<int64_t>([&](const Key& key, int64_t value) { at_least(key, value); });
    for_each_value<double>([&](const Key& key, double value) {
      if (key.rule.range != FloatRange::kUnitInterval) in_range(key, value);
    });
    for_each_value<double>([&](const Key& key, double value) {
      if (key.rule.range == FloatRange::kUnitInterval) in_range(key, value);
    });
    for_each_value<int64_t>([&](const Key& key, int64_t value) { at_most(key, value); });
  }

  // Calls check(key, value) for every key whose field is a T.
  template <typename T, typename Check>
  void for_each_value(Check&& check) {
    case_schema::for_each_case_key(spec_, [&](const Key& key, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, T>) check(key, value);
    });
  }

  // What the producers can run beyond each key's bounds (case_limits.h has the reason for each).
  void check_limits() {
    // steps <= kMaxCaseSteps here, so the product cannot overflow unless grad_accum_steps is
    // itself absurd; divide instead of multiplying.
    if (spec_.train.grad_accum_steps > kMaxCaseSteps / spec_.train.steps) {
      fail(keys::kTrainGradAccumSteps,
           std::to_string(spec_.train.steps) + " steps x " +
               std::to_string(spec_.train.grad_accum_steps) + " micro-batches is more than the " +
               std::to_string(kMaxCaseSteps) + " batches a run may read",
           "use fewer steps or fewer micro-batches per step");
    }
    // Before the model's shapes are inferred (check_model), which takes time per layer.
    const int64_t layers = case_model_depth(spec_.model);
    if (layers > kMaxCaseLayers) {
      const bool widths = spec_.model.layers.empty();
      fail(widths ? keys::kModelWidths : keys::kModelLayers,
           std::to_string(layers) + " layers" +
               (widths ? "" : " (those inside residuals counted)") + ", more than the " +
               std::to_string(kMaxCaseLayers) +
               " parity trains (the engine traces and runs one op group per layer, ddp_ref "
               "builds one module per layer)",
           widths ? "use at most " + std::to_string(kMaxCaseLayers + 1) + " widths"
                  : "use at most " + std::to_string(kMaxCaseLayers) + " layers");
    }
  }

  void check_model() {
    if (!spec_.model.layers.empty()) return check_layers_model();
    if (!spec_.model.input.empty()) {
      fail(keys::kModelInput, "is the input shape of a model given as layers, but this model "
                              "is given as widths",
           "remove input, or describe the model with layers");
    }
    if (spec_.init.scheme == "flax") {
      fail(keys::kInitScheme, "'flax' initialises the Flax modules of a model given as layers",
           "use jax-normal or torch for a widths model, or describe the model with layers");
    }
    const Key& key = keys::kModelWidths;
    const std::vector<int64_t>& widths = spec_.model.widths;
    if (widths.empty()) {
      fail_at(origins_.of(key), key.dotted() + " is required: " + key.help,
              "or describe the model with model.layers (docs/model-layers.md)");
    }
    if (widths.size() < 2) {
      fail(key, "expected at least 2 widths (input and output), found " +
                    std::to_string(widths.size()));
    }
    for (size_t i = 0; i < widths.size(); ++i) {
      if (widths[i] < 1) {
        fail_at(origins_.of(key), key.dotted() + "[" + std::to_string(i) +
                                      "]: expected a width >= 1, found " +
                                      std::to_string(widths[i]));
      }
    }
    model_inputs_ = {&keys::kModelWidths, widths.front(), "widths[0]"};
    model_outputs_ = {&keys::kModelWidths, widths.back(), "the last width"};
  }

  // Every layer takes its input's shape (model_layers.h names the one that does not), and the
  // model ends in one vector per sample.
  void check_layers_model() {
    if (!spec_.model.widths.empty()) {
      fail(keys::kModelWidths, "a model is given either as widths or as layers, not both",
           "remove widths");
    }
    const Key& input = keys::kModelInput;
    if (spec_.model.input.empty()) fail(input, "is required with layers: " + input.help);
    for (int64_t size : spec_.model.input) {
      if (size < 1) fail(input, "expected sizes >= 1, found " + std::to_string(size));
    }
    // Refuses an input of more than kMaxSampleElements values: the product below fits int64.
    const ModelShapes shapes = infer_model_shapes(spec_.model.layers, spec_.model.input);
    const int64_t features = std::accumulate(spec_.model.input.begin(), spec_.model.input.end(),
                                             int64_t{1}, std::multiplies<>());
    if (shapes.output.size() != 1) {
      fail(keys::kModelLayers,
           "the last layer gives one sample a shape of rank " +
               std::to_string(shapes.output.size()) + ", but the loss takes one vector per sample",
           "end with global_avg_pool or flatten, then dense");
    }
    model_inputs_ = {&input, features, "the product of input"};
    model_outputs_ = {&keys::kModelLayers, shapes.output.front(), "the last layer's features"};
    check_layers_trainable();
  }

  // What the producers' layer models do not train yet, refused here rather than when a run
  // reaches them (engine_trainer/src/models/layer_model.cpp, ddp_ref/src/layer_model.cpp).
  void check_layers_trainable() {
    if (spec_.train.dtype != "f32") {
      fail(keys::kTrainDtype,
           "a layers model trains in f32 only, on both producers (mixed precision is "
           "implemented for widths models), found \"" +
               spec_.train.dtype + "\"",
           "set train.dtype = \"f32\", or give the model as widths");
    }
    // Flax's attention draws its weight dropout inside dot_product_attention_weights, which the
    // engine's step does not record.
    if (const LayerSpec* attention = find_layer(spec_.model.layers, [](const LayerSpec& layer) {
          return layer.kind == "attention" && layer.rate > 0;
        })) {
      refuse_layer(*attention,
                   "rate " + format_float(attention->rate) +
                       ": the engine does not model dropout on the attention weights yet",
                   "set rate = 0 and put a dropout layer after the attention, as ViT's encoder "
                   "block does");
    }
    if (dropout_sites(spec_.model).empty()) return;
    // Each step draws every device's masks in one process and records them: micro-batches
    // would need a key each, and other processes' masks would have to be gathered.
    if (spec_.train.grad_accum_steps > 1) {
      fail(keys::kTrainGradAccumSteps,
           "with dropout both producers draw one mask per step, not one per micro-batch, yet",
           "set train.grad_accum_steps = 1, or remove the dropout layers");
    }
    if (spec_.parallel.processes > 1) {
      fail(keys::kParallelProcesses,
           "with dropout the engine records the masks of one process's devices only, yet, "
           "found " +
               std::to_string(spec_.parallel.processes) + " processes",
           "set parallel.processes = 1 (the replicas run in one process), or remove the "
           "dropout layers");
    }
  }

  // Smoothing spreads probability over the classes of a softmax cross-entropy (always 10 here:
  // fashion-mnist is its only dataset, so the Flax examples' eps/(C - 1) has C - 1 > 0).
  void check_label_smoothing() {
    const ModelSpec& model = spec_.model;
    if (model.label_smoothing == 0 || model.loss == "softmax_cross_entropy") return;
    fail(keys::kModelLabelSmoothing,
         "smooths the targets of softmax_cross_entropy, but the loss is " + model.loss,
         "remove label_smoothing, or use loss = \"softmax_cross_entropy\"");
  }

  void check_data() {
    if (spec_.data.dataset == "fashion-mnist") check_fashion_mnist();
    if (spec_.data.dataset == "synthetic-linear") check_synthetic_linear();
    check_batches_exist();
  }

  void check_fashion_mnist() {
    if (model_inputs_.size != kFashionMnistFeatures) {
      fail(*model_inputs_.key, "fashion-mnist images have 784 features (28x28), so " +
                                   model_inputs_.what + " must be 784, found " +
                                   std::to_string(model_inputs_.size));
    }
    if (model_outputs_.size != kFashionMnistClasses) {
      fail(*model_outputs_.key, "fashion-mnist has 10 classes, so " + model_outputs_.what +
                                    " must be 10, found " + std::to_string(model_outputs_.size));
    }
    if (spec_.model.loss != "softmax_cross_entropy") {
      fail(keys::kModelLoss,
           "fashion-mnist has integer class labels; expected softmax_cross_entropy, found " +
               spec_.model.loss);
    }
  }

  void check_synthetic_linear() {
    if (model_outputs_.size > model_inputs_.size) {
      fail(*model_outputs_.key,
           "synthetic-linear targets are a permutation of input features, so " +
               model_outputs_.what + " (" + std::to_string(model_outputs_.size) +
               ") must not exceed " + model_inputs_.what + " (" +
               std::to_string(model_inputs_.size) + ")");
    }
    if (spec_.model.loss != "mse") {
      fail(keys::kModelLoss,
           "synthetic-linear has real-valued targets; expected mse, found " + spec_.model.loss);
    }
  }

  // With drop_last, each replica sees floor(num_samples / replicas) samples per epoch (the
  // DistributedSampler), cut into full batches only: fewer samples than one batch would leave
  // an epoch with no step at all.
  void check_batches_exist() {
    if (!spec_.data.drop_last) return;
    const int64_t num_samples = spec_.data.dataset == "fashion-mnist"
                                    ? kFashionMnistTrainSamples
                                    : spec_.data.synthetic_num_samples;
    const int64_t per_replica = num_samples / spec_.parallel.replicas;
    if (per_replica < spec_.data.per_replica_batch) {
      fail(keys::kDataPerReplicaBatch,
           "with drop_last each replica gets " + std::to_string(per_replica) +
               " samples per epoch, fewer than one batch of " +
               std::to_string(spec_.data.per_replica_batch),
           "use a smaller batch, more samples, or drop_last = false");
    }
  }

  void check_parallel() {
    if (spec_.parallel.replicas % spec_.parallel.processes != 0) {
      fail(keys::kParallelProcesses,
           std::to_string(spec_.parallel.replicas) + " replicas cannot be spread evenly over " +
               std::to_string(spec_.parallel.processes) + " processes; expected a divisor of " +
               keys::kParallelReplicas.dotted());
    }
    if (spec_.parallel.style != "pmap") check_jit_style();
  }

  // What a jit over the global batch can train so that it does what DDP does. The step is
  // loss, grads = value_and_grad(loss_fn)(params, x, y) with the loss the mean over the global
  // batch, so there is one gradient (the global one) and one forward over the global batch.
  // Gradient accumulation maps: each micro-batch's loss is the mean over the global
  // micro-batch, and since DistributedSampler gives every rank a part of the same size, that is
  // the mean of the ranks' means DDP all-reduces; mixed precision maps (its casts are inside
  // loss_fn).
  void check_jit_style() {
    const std::string style = "style = \"" + spec_.parallel.style + "\"";
    if (spec_.parallel.processes != 1) {
      fail(keys::kParallelStyle,
           style + " trains in one process (the engine's sharded jit spans this process's "
               "devices), found " + keys::kParallelProcesses.dotted() + " = " +
               std::to_string(spec_.parallel.processes),
           "set parallel.processes = 1, or style = \"pmap\" for a multi-process run");
    }
    if (spec_.scenario.engine_program != "pmean") {
      fail(keys::kParallelStyle,
           style + " trains the faithful step only (value_and_grad of the global mean loss; the "
               "partitioner inserts the all-reduce), but " +
               keys::kScenarioEngineProgram.dotted() + " = \"" + spec_.scenario.engine_program +
               "\" is a step written for pmap",
           "use style = \"pmap\" for the documents' programs, or engine_program = \"pmean\"");
    }
    if (spec_.train.clip_placement == "before_mean") {
      fail(keys::kParallelStyle,
           style + " has no per-device gradient to clip before the mean (the gradient of the "
               "global mean loss is the mean already), found " +
               keys::kTrainClipPlacement.dotted() + " = \"before_mean\"",
           "use clip_placement = \"after_mean\", or style = \"pmap\"");
    }
    if (!dropout_sites(spec_.model).empty()) {
      fail(keys::kParallelStyle,
           style + " draws one dropout mask for the global batch from one key, where DDP's "
               "ranks (and the pmap step's devices, from [rng] per_device) draw one each, so "
               "the masks cannot agree step by step",
           "use style = \"pmap\", or a model without dropout");
    }
    if (spec_.model.layers.empty()) return;
    if (!infer_model_shapes(spec_.model.layers, spec_.model.input).batch_stats.empty()) {
      fail(keys::kParallelStyle,
           style + " runs BatchNorm over the global batch, so it normalises with the global "
               "batch's statistics (SyncBatchNorm's semantics), while DDP's BatchNorm normalises "
               "each rank's batch with that rank's own statistics (and PyTorch 1.13's "
               "SyncBatchNorm runs on CUDA only, so ddp_ref cannot train the synced form)",
           "use style = \"pmap\" (each device's own statistics, as DDP), or a model without "
           "batch_norm");
    }
  }

  void check_train() {
    if (spec_.train.nesterov && (spec_.train.optimizer != "sgd" || spec_.train.momentum <= 0)) {
      fail(keys::kTrainNesterov,
           "Nesterov momentum needs optimizer = \"sgd\" and momentum > 0 (as torch.optim.SGD "
           "requires), found optimizer = \"" + spec_.train.optimizer +
               "\", momentum = " + format_float(spec_.train.momentum));
    }
    if (spec_.train.clip_placement != "after_mean" && spec_.train.clip_grad_norm <= 0) {
      fail(keys::kTrainClipPlacement,
           "clip_placement = \"" + spec_.train.clip_placement +
               "\" places a clipping the case does not do: set train.clip_grad_norm > 0, or "
               "leave clip_placement out");
    }
    check_adaptive_optimizer();
  }

  // rmsprop and adagrad train without momentum (torch's RMSprop(momentum) and optax's
  // rmsprop(momentum) are not modelled), and only they read eps_in_sqrt.
  void check_adaptive_optimizer() {
    const TrainSpec& train = spec_.train;
    const bool adaptive = train.optimizer == "rmsprop" || train.optimizer == "adagrad";
    if (adaptive && train.momentum != 0) {
      fail(keys::kTrainMomentum,
           "optimizer = \"" + train.optimizer + "\" is trained without momentum here, found " +
               format_float(train.momentum),
           "set train.momentum = 0 (RMSprop with momentum is not modelled yet)");
    }
    if (!adaptive && train.eps_in_sqrt) {
      fail(keys::kTrainEpsInSqrt,
           "only rmsprop and adagrad read it, found optimizer = \"" + train.optimizer + "\"",
           "remove it; Adam's eps inside the square root is train.eps_root");
    }
  }

  void check_compare() {
    const std::vector<std::string>& seed_keys = spec_.compare.seed_keys;
    if (seed_keys.empty()) {
      fail(keys::kCompareSeedKeys, "no key to vary", keys::kCompareSeedKeys.help);
    }
    for (size_t i = 0; i < seed_keys.size(); ++i) {
      one_of(keys::kCompareSeedKeys, seed_keys[i], kCaseSeedKeys);
      if (std::find(seed_keys.begin(), seed_keys.begin() + static_cast<std::ptrdiff_t>(i),
                    seed_keys[i]) != seed_keys.begin() + static_cast<std::ptrdiff_t>(i)) {
        fail(keys::kCompareSeedKeys, "'" + seed_keys[i] + "' is listed twice",
             keys::kCompareSeedKeys.help);
      }
    }
  }

  void check_scenario() {
    const ScenarioSpec& scenario = spec_.scenario;
    const Key& expect = keys::kScenarioExpect;
    if (scenario.id.empty()) {
      const Key* set = !scenario.expect.empty()                ? &expect
                       : !scenario.engine_overrides.empty() ? &keys::kScenarioEngineOverrides
                                                             : nullptr;
      if (set != nullptr) {
        fail(*set,
             "a [scenario] needs an id (the item of docs/pitfalls.md it reproduces, e.g. id = "
             "\"P2\")");
      }
      return;
    }
    one_of(expect, scenario.expect, kExpectations);
    one_of(keys::kScenarioVerdict, scenario.verdict, kVerdicts);
    if (scenario.fact_check.empty()) {
      fail(keys::kScenarioFactCheck, "empty",
           "say what the engines show against the claim, and why the verdict is " +
               scenario.verdict);
    }
    check_figure_texts();
    one_of(keys::kScenarioEngineProgram, scenario.engine_program, engine_program_names());
    one_of(keys::kScenarioReference, scenario.reference, kReferences);
    if (scenario.expect == "error" && scenario.expect_error.empty()) {
      fail_at(origins_.of(expect),
              expect.dotted() + " = \"error\" needs " + keys::kScenarioExpectError.dotted() +
                  ", a part of the error text the engine must raise");
    }
    if (scenario.expect == "not supported" && scenario.missing.empty()) {
      fail_at(origins_.of(expect),
              expect.dotted() + " = \"not supported\" needs " + keys::kScenarioMissing.dotted() +
                  ", the engine feature the case waits for");
    }
  }

  // The fact-check's placeholders and the figure conditions are well formed (the figures
  // themselves exist only once the case has run).
  void check_figure_texts() {
    const ScenarioSpec& scenario = spec_.scenario;
    try {
      placeholders(scenario.fact_check);
    } catch (const InputError& error) {
      fail(keys::kScenarioFactCheck, error.what());
    }
    for (const std::string& entry : scenario.expect_error_by_release) {
      const size_t colon = entry.find(": ");
      const auto& releases = pmap_engine::jax_release_names();
      if (colon == std::string::npos ||
          std::find(releases.begin(), releases.end(), entry.substr(0, colon)) == releases.end()) {
        fail(keys::kScenarioExpectErrorByRelease,
             "'" + entry + "' does not start with a JAX release the engine models",
             "write \"RELEASE: text\" with RELEASE one of " + join(releases));
      }
    }
    for (const std::string& condition : scenario.expect_figures) {
      try {
        parse_figure_condition(condition);
      } catch (const InputError& error) {
        fail(keys::kScenarioExpectFigures, error.what());
      }
    }
  }

  // "section.key: problem at origin; hint".
  [[noreturn]] void fail(const Key& key, const std::string& problem,
                         const std::string& hint = "") const {
    fail_at(origins_.of(key), key.dotted() + ": " + problem, hint);
  }

  void one_of(const Key& key, const std::string& value, const std::vector<std::string>& allowed) {
    if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
    fail(key, "expected one of " + join(allowed) + ", found '" + value + "'",
         did_you_mean(value, allowed));
  }

  void at_least(const Key& key, int64_t value) {
    if (value >= key.rule.min) return;
    fail(key, "expected an integer >= " + std::to_string(key.rule.min) + ", found " +
                  std::to_string(value));
  }

  void at_most(const Key& key, int64_t value) {
    if (value <= key.rule.max) return;
    fail(key, "expected an integer <= " + std::to_string(key.rule.max) + ", found " +
                  std::to_string(value) + " (" + key.help + ")");
  }

  void in_range(const Key& key, double value) {
    if (!std::isfinite(value)) fail(key, "expected a finite number, found " + format_float(value));
    switch (key.rule.range) {
      case FloatRange::kAny: return;
      case FloatRange::kPositive:
        if (value > 0) return;
        fail(key, "expected a value > 0, found " + format_float(value));
      case FloatRange::kNonNegative:
        if (value >= 0) return;
        fail(key, "expected a value >= 0, found " + format_float(value));
      case FloatRange::kUnitInterval:
        if (value >= 0 && value < 1) return;
        fail(key, "expected a value in [0, 1), found " + format_float(value));
    }
  }

  const CaseSpec& spec_;
  const KeyOrigins& origins_;
  // The model's features per sample in and out, the key that sets each, and how to say it.
  struct ModelSide {
    const Key* key = nullptr;
    int64_t size = 0;
    std::string what;
  };
  ModelSide model_inputs_;
  ModelSide model_outputs_;
};

// [case] name is optional: the file name is the case name. A case read from text (a run's
// recorded case: case_from_text) has no file to agree with.
void check_name_matches_file(CaseSpec& spec, const KeyOrigins& origins) {
  if (spec.source_file.empty()) return;
  const std::string stem = spec.source_file.stem().string();
  if (spec.name.empty()) {
    spec.name = stem;
    return;
  }
  if (spec.name != stem) {
    fail_at(origins.of(keys::kCaseName),
            keys::kCaseName.dotted() + ": expected '" + stem +
                "' (the file name without .toml), found '" + spec.name + "'",
            "rename the file or the case so that they agree");
  }
}

// record_steps is a set of steps, numbered from 0; a negative entry counts from the end (-1 is
// the last step, as in Python), so that `--set train.steps=10` keeps "record the last step"
// meaningful. After this, entries lie in [0, steps), sorted, without repeats.
void resolve_record_steps(CaseSpec& spec, const KeyOrigins& origins) {
  std::vector<int64_t>& record_steps = spec.train.record_steps;
  const int64_t steps = spec.train.steps;
  for (size_t i = 0; i < record_steps.size(); ++i) {
    if (record_steps[i] < -steps || record_steps[i] >= steps) {
      fail_at(origins.of(keys::kTrainRecordSteps),
              keys::kTrainRecordSteps.dotted() + "[" + std::to_string(i) +
                  "]: expected a step in [" + std::to_string(-steps) + ", " +
                  std::to_string(steps) + ") (0 is the first step, -1 the last), found " +
                  std::to_string(record_steps[i]));
    }
    if (record_steps[i] < 0) record_steps[i] += steps;
  }
  std::sort(record_steps.begin(), record_steps.end());
  record_steps.erase(std::unique(record_steps.begin(), record_steps.end()), record_steps.end());
}

}  // namespace

void check_case(CaseSpec& spec, const KeyOrigins& origins) {
  check_name_matches_file(spec, origins);
  CaseChecker(spec, origins).check_all();
  resolve_record_steps(spec, origins);
}

}  // namespace parity
