// Case files: the TOML description of one training scenario that both engines run.
// The schema (every key, its type, default and meaning) is documented in docs/case-schema.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "parity/common/model_layers.h"
#include "pmap_engine/jax_release.h"

namespace parity {

struct ModelSpec {
  // Layer widths including input and output: {784, 256, 10} is 784 -> 256 -> 10.
  // Layer i is `dense{i}` with kernel (widths[i], widths[i+1]) and bias (widths[i+1]).
  std::vector<int64_t> widths;
  // Or the model as a list of layers (docs/model-layers.md), each sample reshaped to `input`
  // (one sample's shape, NHWC without N) first. Excludes widths.
  std::vector<int64_t> input;
  std::vector<LayerSpec> layers;
  std::string activation = "tanh";           // tanh | relu | gelu, between layers
  std::string loss = "softmax_cross_entropy";  // softmax_cross_entropy (integer labels) | mse
  // softmax_cross_entropy only: the smoothing epsilon in [0, 1), and whose smoothed loss
  // (docs/case-schema.md): "uniform", torch's CrossEntropyLoss(label_smoothing) and
  // optax.smooth_labels, or "flax_examples", the Flax WMT/LM1B examples' KL form.
  double label_smoothing = 0.0;
  std::string label_smoothing_form = "uniform";
};

struct DataSpec {
  std::string dataset = "fashion-mnist";  // fashion-mnist | synthetic-linear
  int64_t per_replica_batch = 64;
  uint64_t seed = 0;        // DistributedSampler seed (shuffle order), as in PyTorch
  bool shuffle = true;
  bool drop_last = false;   // of DistributedSampler and of the DataLoader alike
  // synthetic-linear only: how many samples, and the seed that generates them.
  int64_t synthetic_num_samples = 8192;
  uint64_t synthetic_seed = 0;
  // Added to every input feature of both splits (float32): inputs that are not centred, whose
  // mean is large against their spread.
  double feature_offset = 0;
};

struct ParallelSpec {
  int64_t replicas = 8;   // data-parallel world size
  int64_t processes = 1;  // processes the replicas are spread over
  // How the engine spreads the step over the devices (docs/case-schema.md): "pmap" (the step
  // per device, gradients pmean'd), "jit-dp" (jit over the global batch, params replicated) or
  // "jit-fsdp" (jit, params and optimizer state sharded over the devices). ddp_ref trains DDP
  // whatever it says.
  std::string style = "pmap";
};

struct TrainSpec {
  int64_t steps = 200;
  std::string optimizer = "adam";  // sgd | adam | adamw | rmsprop | adagrad
  double lr = 1e-3;
  double momentum = 0.0;     // sgd
  bool nesterov = false;     // sgd
  double weight_decay = 0.0; // sgd (L2), adamw (decoupled); adam (L2, as torch.optim.Adam)
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // adam, adamw: optax's eps_root, added to the second moment inside the sqrt. torch.optim's
  // Adam has none, so ddp_ref trains only eps_root = 0 (the default).
  double eps_root = 0.0;
  // rmsprop, adagrad: the defaults are PyTorch's, the values ddp_ref can train; optax's differ
  // (optax/_src/alias.py rmsprop: decay 0.9, eps_in_sqrt true; adagrad: initial accumulator
  // 0.1, eps 1e-7 inside the sqrt).
  double rms_decay = 0.99;                 // rmsprop: torch's alpha, optax's decay
  double initial_accumulator_value = 0.0;  // adagrad: torch's and optax's name alike
  // rmsprop, adagrad: eps inside the square root, 1/sqrt(v + eps) (optax's default), or added
  // after it, 1/(sqrt(v) + eps) (torch.optim's only form, so ddp_ref trains only false).
  bool eps_in_sqrt = false;
  double clip_grad_norm = 0.0;   // 0 disables clipping by global norm
  // Where the clipping runs: after_mean (DDP's clip_grad_norm_ after the all-reduce; optax's
  // clip_by_global_norm after lax.pmean) | before_mean (each device clips its own gradient
  // inside the mapped step, then the mean: a port's misplacement; the engine only).
  std::string clip_placement = "after_mean";
  int64_t grad_accum_steps = 1;  // micro-batches per optimizer step
  std::string dtype = "f32";     // f32 | bf16 | f16 (compute dtype; master weights stay f32)
  std::vector<int64_t> record_steps;  // steps whose tensors are written to tensors/
};

struct InitSpec {
  std::string scheme = "jax-normal";  // kernels normal(split(key)[i]) * scale, biases zero
  uint64_t seed = 0;
  double scale = 0.01;

  // The same initial parameters (for the same model).
  bool operator==(const InitSpec& other) const {
    return scheme == other.scheme && seed == other.seed && scale == other.scale;
  }
};

// Where dropout's random numbers come from (docs/rng.md, "Dropout streams"). The engine derives
// each step's and device's key as a JAX user's step does; Flax then folds in each Dropout
// module's path (make_rng("dropout")). Part of what is trained.
struct RngSpec {
  uint64_t seed = 0;  // the root key: jax.random.PRNGKey(seed)
  // fold_in: fold_in(root, step) | split: a carried key split every step, its second half used |
  // none: the root key at every step (R2, a key reused across steps)
  std::string per_step = "fold_in";
  // fold_in: fold_in(key, axis_index("data")) inside the step | split: split(key, n)[d], passed
  // with in_axes=0 | none: the same key on every device (P5)
  std::string per_device = "fold_in";
  // ddp_ref's masks: threefry (the engine's keys and jax.random.bernoulli, so both producers
  // draw bit-identical masks) | torch (LibTorch's generator, as torch.nn.Dropout draws)
  std::string ddp = "threefry";
  // rng.ddp = "torch": each rank's torch::manual_seed; seed+rank | seed (R1, every rank alike)
  std::string torch_seed = "seed+rank";
};

// The JAX release pmap_engine models for this case (pmap_engine/jax_release.h): where releases
// differ in an error text or a behaviour, the engine follows this one. Part of what is run.
struct JaxSpec {
  std::string version = pmap_engine::to_string(pmap_engine::kDefaultJaxRelease);
};

// How `parity run` judges the case; not part of what is trained (CaseSpec::hash() leaves it out).
// The case's seeds, the keys a seed set's runs may differ in (parity run --seeds).
inline const std::vector<std::string> kCaseSeedKeys = {"rng.seed", "data.seed", "init.seed"};

struct CompareSpec {
  // Also train the engine in float64 and measure both runs' error against it (the oracle).
  bool oracle = false;
  // The gradient and parameter tolerances (|a - b| <= atol + rtol |b|) when the case needs a
  // band of its own (16-bit runs under Adam); 0: the defaults for the runs' dtype. The command
  // line's --tensor-rtol/--tensor-atol win over these.
  double tensor_rtol = 0.0;
  double tensor_atol = 0.0;
  // parity run --seeds N: seed i's runs set each of these keys to the case's value + i (the
  // dropout streams by default; add data.seed to vary the data order, init.seed the start).
  std::vector<std::string> seed_keys = {"rng.seed"};
  // The equivalence margins of the final values over seeds (compare/seed_sets.h): a loss in its
  // own units, an accuracy as a fraction (0.01 is one percentage point). --loss-margin and
  // --accuracy-margin win.
  double seeds_loss_margin = 0.02;
  double seeds_accuracy_margin = 0.01;
};

// A case that reproduces an item of the source documents (docs/pitfalls.md: S1-S11, P1-P14):
// what the document claims and what parity expects to see. Not part of what is trained
// (CaseSpec::hash() leaves it out): the engine program is the user's code under test, the case
// is the same. Cases without a scenario (id empty) are plain training cases.
struct ScenarioSpec {
  std::string id;          // "P2", "S6", ...
  std::string title;       // one line
  std::string source;      // document and section, e.g. "000 §4.3, §7"
  std::string claim;       // what the document claims
  // The verdict on the claim when the run behaves as the case expects: confirmed | refuted |
  // partly | not reproducible here | not checkable here (the fact-check says why).
  std::string verdict;
  // What the engines show against the claim. Its numbers are placeholders ("{loss_ratio.last}")
  // filled from the figures the run computed (parity/common/observed_figures.h).
  std::string fact_check;
  // equivalent | not equivalent | error | probe | not supported (a probe program checks an
  // engine behaviour the document describes and says what it saw)
  std::string expect;
  std::vector<std::string> expect_diagnoses;  // pitfall ids the diagnosis must name, in order
  std::string expect_error;                   // a part of the expected error text
  // The expected error text where a JAX release raises another one than the default release:
  // "RELEASE: text" entries, e.g. "0.4.38: requires 65 logical devices" (jax.version picks).
  std::vector<std::string> expect_error_by_release;
  // Conditions on the run's figures that are part of the expectation, e.g.
  // "grad_norm_ratio.first = 8 ± 0.01": the verdict rests on them.
  std::vector<std::string> expect_figures;
  std::string missing;                        // not supported: which engine feature is missing
  // The engine-side step, written as the document's snippet does it (engine_trainer's
  // parity/engine_trainer/scenario_programs.h lists them); "pmean" is the faithful data-parallel step.
  std::string engine_program = "pmean";
  // What the engine producer trains with on top of the case (and of its quick and command-line
  // overrides), as `section.key=value` overrides in --set's grammar: the port kept a Flax or
  // Optax default where the PyTorch job used PyTorch's (model.layers[1].momentum=0.99). ddp_ref
  // trains the case without them; engine_case() applies them.
  std::vector<std::string> engine_overrides;
  // Run B, the reference: "ddp_ref", or "engine" (the engine's faithful pmean step, for a case
  // ddp_ref cannot train here, such as f16 on a LibTorch without CPU f16 matmul).
  std::string reference = "ddp_ref";
  // Overrides that make the quick variant (the test suite's), e.g. ["train.steps=10"].
  std::vector<std::string> quick;
};

struct CaseSpec {
  std::string name;
  std::string description;
  std::filesystem::path source_file;  // the TOML file it was loaded from
  ModelSpec model;
  DataSpec data;
  ParallelSpec parallel;
  TrainSpec train;
  InitSpec init;
  RngSpec rng;
  JaxSpec jax;
  CompareSpec compare;
  ScenarioSpec scenario;

  // Hex digest of the canonical form of the training sections after overrides (every section
  // but [compare] and [scenario]): two runs with the same hash trained the same scenario.
  std::string hash() const;
  // The canonical TOML text of the case, every section ([scenario] only when it has an id),
  // for run.json and reports.
  std::string to_toml() const;
  // The canonical TOML of the training sections only (what hash() digests).
  std::string training_toml() const;
};

// Where case files are looked up by name: $PARITY_CASES_DIR if set, else the repository's
// cases/ folder (compiled in).
std::filesystem::path cases_dir();

// Loads `name_or_path` (a case name in cases_dir() or a path to a .toml file), applies the
// `section.key=value` overrides in order, and validates. Unknown keys, wrong types and
// out-of-range values throw InputError naming file:line (or the override) and the fix.
CaseSpec load_case(const std::string& name_or_path,
                   const std::vector<std::string>& overrides = {});

// A case from its TOML text (a run's recorded case, run.json's case.toml), validated as
// load_case validates a file; `origin` names the text in errors ("RUN/run.json (case.toml)").
// No overrides and no memory estimate: a recorded case has already been trained.
CaseSpec case_from_text(const std::string& toml, const std::filesystem::path& origin);

// The case the engine producer trains: `spec` with its scenario.engine_overrides applied on top,
// checked as load_case checks a case (load_case has already checked them once, naming each
// entry's place in the file). `spec` itself when it has none. Applying them to their own result
// changes nothing, so a process handed the engine's case may call this again.
CaseSpec engine_case(const CaseSpec& spec);

// Every case in cases_dir(), sorted by name.
std::vector<CaseSpec> list_cases();

}  // namespace parity
