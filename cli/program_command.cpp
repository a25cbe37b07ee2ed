#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <numeric>

#include "case_init.h"
#include "commands.h"
#include "layer_model.h"
#include "mlp_program.h"
#include "parity/common/case_spec.h"
#include "parity/common/engine_programs.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "pmap_engine/ops.h"
#include "scenario_programs.h"

namespace parity::cli {

namespace {

namespace pe = pmap_engine;

// The summary under the program: its size, what compilation made of it and how long the first
// (cold) call took to trace and compile it, and its memory on running it once: the live buffers'
// peak, which is the analytic minimum for this program (each value held from its definition to
// its last use, an element-wise result written over an input dying there), and what the device
// held at its worst point, the dead storage kept for reuse included.
std::string describe_step(const std::string& case_name, int64_t batch, int64_t num_ops,
                          const pe::CacheStats& compiled, int64_t peak_bytes,
                          int64_t footprint_bytes) {
  const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  return fmt::format(
      "# case {}: train step on one device, global batch {}: {} ops; compiled to {} kernels "
      "({} ops in loop fusions, {} transposes folded into products); first call: trace {:.1f} "
      "ms + compile {:.1f} ms\n"
      "# peak memory {} bytes ({:.1f} MiB) of live buffers, the analytic minimum of this "
      "program; held at most {} bytes ({:.1f} MiB, {:.2f}x) with the storage kept for reuse "
      "(measured by running the step once)\n",
      case_name, batch, num_ops, compiled.compiled_equations, compiled.fused_equations,
      compiled.folded_transposes, compiled.last_trace_seconds * 1e3,
      compiled.last_compile_seconds * 1e3, peak_bytes, mib(peak_bytes), footprint_bytes,
      mib(footprint_bytes),
      peak_bytes > 0 ? static_cast<double>(footprint_bytes) / static_cast<double>(peak_bytes)
                     : 1.0);
}

// The jitted step of seed 002's MLP on the global batch.
void print_widths_program(const CaseSpec& spec) {
  const int64_t batch = spec.parallel.replicas * spec.data.per_replica_batch;
  const int64_t input_dim = spec.model.widths.front();
  pe::Tree params = cases::params_from_tensors(make_init_params(spec));
  pe::Tree opt_state = cases::make_optimizer(spec.train).init(params);
  pe::Array x = pe::zeros({batch, input_dim});
  pe::Array y = spec.model.loss == "mse" ? pe::zeros({batch, spec.model.widths.back()})
                                         : pe::zeros({batch}, pe::DType::i32);
  pe::Jitted step = cases::make_train_step(spec);
  // The first call traces and compiles cold; the text is traced again afterwards.
  step({params, opt_state, x, y});
  const pe::ExecutionStats stats = step.last_execution();
  std::cout << step.program_text({params, opt_state, x, y});
  std::cout << describe_step(spec.name, batch, stats.num_ops, step.cache_stats(),
                             stats.peak_bytes, stats.peak_footprint_bytes);
}

// The engine trainer's mapped step, here on a single device fed the global batch: a layers
// model's (a BatchNorm with sync names the "data" axis, which only a mapped call binds), and a
// program's that runs under shard_map (its values typed with the axes they vary along, the
// pvary and psum_invariant JAX inserts shown).
void print_mapped_program(const CaseSpec& spec) {
  const int64_t batch = spec.parallel.replicas * spec.data.per_replica_batch;
  const bool layers = !spec.model.layers.empty();
  const std::vector<int64_t> input =
      layers ? spec.model.input : std::vector<int64_t>{spec.model.widths.front()};
  const int64_t input_dim =
      std::accumulate(input.begin(), input.end(), int64_t{1}, std::multiplies<>());
  const pe::Tree params =
      cases::params_from_tensors(make_init_params(spec), cases::name_separator(spec.model));
  const pe::Tree opt_state = engine_trainer::step_optimizer(spec).init(params);
  const int64_t outputs = layers ? infer_model_shapes(spec.model.layers, input).output.back()
                                 : spec.model.widths.back();
  engine_trainer::EngineStepOptions options;
  options.program = spec.scenario.engine_program;
  const engine_trainer::MappedTrainStep step =
      engine_trainer::make_mapped_train_step(spec, pe::DeviceSet(1), options);
  // pmap's layout, a leading device axis of 1, or jit's global values (parallel.style).
  const engine_trainer::StepLayout& layout = step.layout();
  const auto state = [&](const pe::Tree& tree) {
    return layout.stacked_state ? engine_trainer::replicate(tree, 1) : tree;
  };
  const auto batch_shape = [&](std::vector<int64_t> sample) {
    sample.insert(sample.begin(), batch);
    if (!layout.global_batch) sample.insert(sample.begin(), 1);
    return sample;
  };
  const pe::Array x = pe::zeros(batch_shape({input_dim}));
  const pe::Array y = spec.model.loss == "mse" ? pe::zeros(batch_shape({outputs}))
                                               : pe::zeros(batch_shape({}), pe::DType::i32);
  const auto arguments = [&] {
    std::vector<pe::Tree> args = {state(params), state(opt_state), x, y};
    if (layers) args.push_back(state(cases::initial_batch_stats(spec.model, pe::DType::f32)));
    return args;
  };
  step(arguments());
  const pe::MappedExecutionStats stats = step.last_execution();
  std::cout << step.program_text(arguments());
  std::cout << describe_step(spec.name, batch, stats.num_ops, step.cache_stats(),
                             stats.peak_bytes_per_device, stats.peak_footprint_bytes_per_device);
}

}  // namespace

void register_program_command(CLI::App& app) {
  struct Arguments {
    std::string case_name;
    std::vector<std::string> overrides;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* command = app.add_subcommand(
      "program",
      "Print a case's traced train step (forward, backward, update) like jax.make_jaxpr, with "
      "its op count and peak memory on one device");
  command->add_option("case", arguments->case_name, "case name or path to a .toml file")
      ->required();
  command->add_option("--set", arguments->overrides, "override a case key: section.key=value");
  command->callback([arguments] {
    const CaseSpec spec = load_case(arguments->case_name, arguments->overrides);
    const pe::ScopedJaxRelease release = cases::case_jax_release(spec);
    // A widths model's step is seed 002's jitted one, unless what it does happens across the
    // devices (a shard_map program; clipping each device's gradient before the mean).
    if (spec.model.layers.empty() &&
        !find_engine_program(spec.scenario.engine_program).runs_under_shard_map &&
        spec.train.clip_placement == "after_mean") {
      print_widths_program(spec);
    } else {
      print_mapped_program(spec);
    }
  });
}

}  // namespace parity::cli
