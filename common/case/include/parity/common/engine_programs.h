// The engine programs a case may name (scenario.engine_program, parity pmap --program): one
// table, each program's name spelled here once, with the traits that tell the engine trainer,
// the case checker and the scenario runner what the program does. The programs themselves (the
// step written the way a source document's snippet writes it) are in engine_trainer/src/programs/,
// which dispatches on these traits, never on the names.
#pragma once

#include <string>
#include <vector>

namespace parity {

// What running the program does.
enum class ProgramKind {
  kTrains,               // a train step: parity pmap, parity run, a comparison case
  kFailsBeforeTraining,  // reproduces an engine error the document describes (expect "error")
  kProbes,               // looks at one engine behaviour (expect "probe")
};

// How the step turns each device's gradients into the ones the optimizer applies.
enum class GradientReduction {
  kPmean,                 // grads = pmean(grad(loss_fn)(...)): DDP's average
  kPsum,                  // grads = psum(grads), no division (P2)
  kPsumThenDivide,        // grads = psum(grads) / device_count (S2)
  kPsumInsideLoss,        // grad of a loss psum'd inside the function, no reduction after (P3)
  kNone,                  // each device applies its own gradients (P11)
  kMismatchedAxisNames,   // pmap(axis_name='batch') with pmean(axis_name='devices') (P1)
};

// How a jit-* program shards the arguments of 002 §2.2's jitted step.
enum class JitShardings {
  kNotJit,
  kTwoForFourArguments,  // in_shardings=(data_sharding, data_sharding) for four arguments (S5)
  kAllOnTheDataAxis,     // all four P('data'): params and optimizer state sharded too (P12)
};

enum class Probe {
  kNone,
  kDeviceAxis,
  kDeviceOrder,
  kRecompilation,
  kDropoutKey,
  kCommunicationVolume,  // C1: the bytes an all-reduce sends
  kMemory7b,             // C2: a 7B model's memory from shapes alone
  kFewerDevices,  // C4: pmap over fewer devices than there are
  kDebugging,     // C5: NumPy on a tracer, print inside jit
};

struct EngineProgram {
  std::string name;
  std::string what;  // one line: the mistake or behaviour, with the pitfall's id
  ProgramKind kind = ProgramKind::kTrains;
  GradientReduction reduction = GradientReduction::kPmean;
  bool updates_per_micro_batch = false;      // an update after every micro-batch (P9)
  bool broadcasts_params = false;            // params and opt state in_axes=None (S4)
  bool initialises_per_device = false;       // init(fold_in(key, device)) per device (P4)
  bool keeps_loss_in_compute_dtype = false;  // a f16/bf16 loss left uncast (P10)
  bool resumes_on_half_the_devices = false;  // checkpoint at the middle step, restore (S10)
  bool every_process_reads_everything = false;  // no jax.process_index() sharding (P8)
  bool feeds_65_samples_to_8_devices = false;   // a global batch of 65 mapped as is (P6)
  // The step under jax.shard_map(check_vma=True) over Mesh(devices, ('data',)), params and
  // optimizer state replicated P(), x and y split P('data'), instead of under pmap (P3b): the
  // same code, other autodiff (a replicated parameter's gradient is summed over the devices).
  bool runs_under_shard_map = false;
  // Trains a layers model (docs/model-layers.md), its BatchNorm statistics threaded through the
  // step as the model state; the others train widths models only.
  bool trains_layer_models = false;
  JitShardings jit = JitShardings::kNotJit;
  Probe probe = Probe::kNone;

  // Whether the program runs in one process only (its state or data lives on one host; the
  // engine's shard_map maps over one process's devices).
  bool needs_one_process() const {
    return broadcasts_params || initialises_per_device || resumes_on_half_the_devices ||
           runs_under_shard_map;
  }
};

// Every program, in the order the catalogue lists them.
const std::vector<EngineProgram>& engine_programs();
// The names, in that order (for CLI choices and error messages).
const std::vector<std::string>& engine_program_names();
// The program named `name`; InternalError for a name case validation would have refused.
const EngineProgram& find_engine_program(const std::string& name);
// The names of the programs of one kind, comma-separated, for an error message.
std::string engine_program_names_of_kind(ProgramKind kind);
// The names of the programs that train layers models, comma-separated.
std::string layer_model_program_names();

}  // namespace parity
