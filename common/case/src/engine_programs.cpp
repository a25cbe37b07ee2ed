#include "parity/common/engine_programs.h"

#include <fmt/format.h>

#include <functional>

#include "parity/common/error.h"

namespace parity {
namespace {

EngineProgram trains(std::string name, std::string what) {
  EngineProgram program;
  program.name = std::move(name);
  program.what = std::move(what);
  return program;
}

EngineProgram fails(std::string name, std::string what) {
  EngineProgram program = trains(std::move(name), std::move(what));
  program.kind = ProgramKind::kFailsBeforeTraining;
  return program;
}

EngineProgram probe(std::string name, std::string what, Probe which) {
  EngineProgram program = trains(std::move(name), std::move(what));
  program.kind = ProgramKind::kProbes;
  program.probe = which;
  return program;
}

// The probe programs, in table order: each looks at one engine behaviour and says what it saw.
struct ProbeRow {
  const char* name;
  const char* what;
  Probe which;
};
constexpr ProbeRow kProbes[] = {
    {"probe-device-axis", "P7: the shape of a pmapped loss", Probe::kDeviceAxis},
    {"probe-device-order", "P13: the order devices are listed in", Probe::kDeviceOrder},
    {"probe-recompilation", "P14: which calls retrace a jitted step", Probe::kRecompilation},
    {"probe-dropout-key", "P5: dropout masks from one key, split keys, folded keys",
     Probe::kDropoutKey},
    {"probe-communication-volume", "C1: bytes each device sends in an all-reduce of the gradients",
     Probe::kCommunicationVolume},
    {"probe-memory-7b", "C2: a 7B model's parameters, gradients and Adam state per device",
     Probe::kMemory7b},
    {"probe-fewer-devices", "C4: pmap over fewer devices than there are (000 §3.1)",
     Probe::kFewerDevices},
    {"probe-debugging", "C5: NumPy on a tracer and print inside jit (001 §4.2-4.3)",
     Probe::kDebugging},
};

std::vector<EngineProgram> make_table() {
  std::vector<EngineProgram> table;
  table.push_back(trains("pmean", "the faithful step: grads = pmean(grad(loss_fn)(...))"));
  table.back().trains_layer_models = true;
  table.push_back(trains("psum", "P2: grads = psum(grads), no division"));
  table.back().reduction = GradientReduction::kPsum;
  table.push_back(trains("psum-divide", "S2: grads = psum(grads) / device_count"));
  table.back().reduction = GradientReduction::kPsumThenDivide;
  table.push_back(
      trains("psum-loss-in-grad", "P3: grad of a loss that is psum'd inside the function"));
  table.back().reduction = GradientReduction::kPsumInsideLoss;
  table.push_back(trains("psum-loss-in-grad-shard-map",
                         "P3b: the same step under shard_map(check_vma=True), params P()"));
  table.back().reduction = GradientReduction::kPsumInsideLoss;
  table.back().runs_under_shard_map = true;
  table.push_back(trains("pmean-shard-map",
                         "P3c: the pmean step moved into shard_map(check_vma=True) as it is"));
  table.back().runs_under_shard_map = true;
  table.push_back(trains("params-in-axes-none",
                         "S4: params broadcast with in_axes=None, not replicated"));
  table.back().broadcasts_params = true;
  table.push_back(
      trains("init-per-device", "P4: each device initialises from fold_in(key, device)"));
  table.back().initialises_per_device = true;
  table.push_back(
      trains("no-grad-reduction", "P11: each device applies its own local gradients"));
  table.back().reduction = GradientReduction::kNone;
  table.push_back(trains("update-inside-accumulation",
                         "P9: an optimizer update after every micro-batch"));
  table.back().updates_per_micro_batch = true;
  table.push_back(trains("loss-without-cast", "P10: a mixed-precision loss left in f16/bf16"));
  table.back().keeps_loss_in_compute_dtype = true;
  table.push_back(trains("checkpoint-reshard",
                         "S10: save at the middle step, resume on half the devices"));
  table.back().resumes_on_half_the_devices = true;
  table.push_back(trains("process-data-not-sharded",
                         "P8: 2 processes each reading the whole dataset"));
  table.back().every_process_reads_everything = true;
  table.push_back(fails("axis-name-mismatch",
                        "P1: pmap(axis_name='batch') with psum(axis_name='devices')"));
  table.back().reduction = GradientReduction::kMismatchedAxisNames;
  table.push_back(fails("batch-65-on-8", "P6: a global batch of 65 mapped over 8 devices"));
  table.back().feeds_65_samples_to_8_devices = true;
  table.push_back(fails("jit-named-sharding",
                        "S5: 002 §2.2's jitted step with two in_shardings for four args"));
  table.back().jit = JitShardings::kTwoForFourArguments;
  table.push_back(
      fails("jit-params-sharded", "P12: the same with params and optimizer state P('data')"));
  table.back().jit = JitShardings::kAllOnTheDataAxis;
  for (const ProbeRow& row : kProbes) table.push_back(probe(row.name, row.what, row.which));
  return table;
}

}  // namespace

const std::vector<EngineProgram>& engine_programs() {
  static const std::vector<EngineProgram> table = make_table();
  return table;
}

const std::vector<std::string>& engine_program_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const EngineProgram& program : engine_programs()) out.push_back(program.name);
    return out;
  }();
  return names;
}

const EngineProgram& find_engine_program(const std::string& name) {
  for (const EngineProgram& program : engine_programs()) {
    if (program.name == name) return program;
  }
  throw InternalError("engine program '" + name + "' passed case validation");
}

namespace {

std::string program_names_where(const std::function<bool(const EngineProgram&)>& predicate) {
  std::vector<std::string> names;
  for (const EngineProgram& program : engine_programs()) {
    if (predicate(program)) names.push_back(program.name);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::string engine_program_names_of_kind(ProgramKind kind) {
  return program_names_where([kind](const EngineProgram& program) { return program.kind == kind; });
}

std::string layer_model_program_names() {
  return program_names_where(
      [](const EngineProgram& program) { return program.trains_layer_models; });
}

}  // namespace parity
