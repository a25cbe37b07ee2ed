#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <numeric>

#include "case_init.h"
#include "commands.h"
#include "parity/common/case_spec.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"
#include "parity/engine_trainer/case_model.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "parity/engine_trainer/scenario_programs.h"
#include "pmap_engine/ops.h"

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
  pe::Tree params = engine_trainer::params_from_tensors(make_init_params(spec));
  pe::Tree opt_state = engine_trainer::make_optimizer(spec.train).init(params);
  pe::Array x = pe::zeros({batch, input_dim});
  pe::Array y = spec.model.loss == "mse" ? pe::zeros({batch, spec.model.widths.back()})
                                         : pe::zeros({batch}, pe::DType::i32);
  pe::Jitted step = engine_trainer::make_train_step(spec);
  // The first call traces and compiles cold; the text is traced again afterwards.
  step({params, opt_state, x, y});
  const pe::ExecutionStats stats = step.last_execution();
  std::cout << step.program_text({params, opt_state, x, y});
  std::cout << describe_step(spec.name, batch, stats.num_ops, step.cache_stats(),
                             stats.peak_bytes, stats.peak_footprint_bytes);
}

// The arguments of the engine trainer's mapped step for the case's global batch (zeros), in
// the step's layout: pmap's leading device axis over `devices`, or jit's global values.
std::vector<pe::Tree> mapped_step_arguments(const CaseSpec& spec,
                                            const engine_trainer::StepLayout& layout,
                                            int64_t devices) {
  const int64_t batch = spec.parallel.replicas * spec.data.per_replica_batch;
  const bool layers = !spec.model.layers.empty();
  const std::vector<int64_t> input =
      layers ? spec.model.input : std::vector<int64_t>{spec.model.widths.front()};
  const int64_t input_dim =
      std::accumulate(input.begin(), input.end(), int64_t{1}, std::multiplies<>());
  const pe::Tree params = engine_trainer::params_from_tensors(
      make_init_params(spec), engine_trainer::name_separator(spec.model));
  const pe::Tree opt_state = engine_trainer::step_optimizer(spec).init(params);
  const int64_t outputs = layers ? infer_model_shapes(spec.model.layers, input).output.back()
                                 : spec.model.widths.back();
  const auto state = [&](const pe::Tree& tree) {
    return layout.stacked_state ? engine_trainer::replicate(tree, devices) : tree;
  };
  const auto batch_shape = [&](std::vector<int64_t> sample) {
    if (layout.global_batch) {
      sample.insert(sample.begin(), batch);
    } else {
      sample.insert(sample.begin(), {devices, batch / devices});
    }
    return sample;
  };
  std::vector<pe::Tree> args = {
      state(params), state(opt_state), pe::Tree(pe::zeros(batch_shape({input_dim}))),
      pe::Tree(spec.model.loss == "mse" ? pe::zeros(batch_shape({outputs}))
                                        : pe::zeros(batch_shape({}), pe::DType::i32))};
  if (layers)
    args.push_back(state(engine_trainer::initial_batch_stats(spec.model, pe::DType::f32)));
  return args;
}

engine_trainer::MappedTrainStep make_step(const CaseSpec& spec, int64_t devices) {
  engine_trainer::EngineStepOptions options;
  options.program = spec.scenario.engine_program;
  return engine_trainer::make_mapped_train_step(spec, pe::DeviceSet(static_cast<int>(devices)),
                                                options);
}

// The engine trainer's mapped step, here on a single device fed the global batch: a layers
// model's (a BatchNorm with sync names the "data" axis, which only a mapped call binds), and a
// program's that runs under shard_map (its values typed with the axes they vary along, the
// pvary and psum_invariant JAX inserts shown).
void print_mapped_program(const CaseSpec& spec) {
  const int64_t batch = spec.parallel.replicas * spec.data.per_replica_batch;
  const engine_trainer::MappedTrainStep step = make_step(spec, 1);
  step(mapped_step_arguments(spec, step.layout(), 1));
  const pe::MappedExecutionStats stats = step.last_execution();
  std::cout << step.program_text(mapped_step_arguments(spec, step.layout(), 1));
  std::cout << describe_step(spec.name, batch, stats.num_ops, step.cache_stats(),
                             stats.peak_bytes_per_device, stats.peak_footprint_bytes_per_device);
}

// The case under each jit style --sharded shows: its own, or both when it trains under pmap,
// each loaded with that style so that the case checker refuses, before any program is printed,
// what a jit style cannot train (dropout, BatchNorm, ...: case_checker.cpp, check_jit_style).
std::vector<CaseSpec> sharded_cases(const std::string& case_name,
                                    const std::vector<std::string>& overrides,
                                    const CaseSpec& spec) {
  if (spec.parallel.style != "pmap") return {spec};
  std::vector<CaseSpec> styled;
  for (const char* style : {"jit-dp", "jit-fsdp"}) {
    std::vector<std::string> with_style = overrides;
    with_style.push_back(std::string("parallel.style=") + style);
    try {
      styled.push_back(load_case(case_name, with_style));
    } catch (const InputError& error) {
      throw InputError(fmt::format(
          "--sharded shows case {} under parallel.style = \"{}\", which it cannot train: {}; "
          "run parity program without --sharded for its pmap program",
          spec.name, style, error.what()));
    }
  }
  return styled;
}

// --sharded: the jit step partitioned over the case's parallel.replicas devices, for each of
// sharded_cases: every value's sharding, the per-device program with its collectives, then what
// one step held per device.
void print_sharded_programs(const std::vector<CaseSpec>& cases) {
  for (const CaseSpec& styled : cases) {
    const std::string& style = styled.parallel.style;
    const int64_t devices = styled.parallel.replicas;
    const engine_trainer::MappedTrainStep step = make_step(styled, devices);
    std::vector<pe::Tree> args = mapped_step_arguments(styled, step.layout(), devices);
    const engine_trainer::DeviceStateBytes held = step.device_state_bytes(args[0], args[1]);
    std::cout << fmt::format("# case {}, parallel.style = \"{}\", {} devices\n", styled.name, style,
                             devices)
              << step.partitioned_program_text(args);
    step(std::move(args));
    const pe::MappedExecutionStats stats = step.last_execution();
    std::cout << fmt::format(
        "  parameters {} bytes + optimizer state {} bytes per device ({})\n"
        "  peak of live buffers {} bytes ({:.1f} MiB) per device, running the step once\n\n",
        held.params, held.opt_state, held.layout, stats.peak_bytes_per_device,
        static_cast<double>(stats.peak_bytes_per_device) / (1 << 20));
  }
}

}  // namespace

void register_program_command(CLI::App& app) {
  struct Arguments {
    std::string case_name;
    std::vector<std::string> overrides;
    bool sharded = false;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* command = app.add_subcommand(
      "program",
      "Print a case's traced train step (forward, backward, update) like jax.make_jaxpr, with "
      "its op count and peak memory on one device");
  command->add_option("case", arguments->case_name, "case name or path to a .toml file")
      ->required();
  command->add_option("--set", arguments->overrides, "override a case key: section.key=value");
  command->add_flag("--sharded", arguments->sharded,
                    "the jit step partitioned over parallel.replicas devices (parallel.style "
                    "jit-dp or jit-fsdp; both for a pmap case): each value's sharding, the "
                    "per-device program with its collectives, the memory per device");
  command->callback([arguments] {
    const CaseSpec spec = load_case(arguments->case_name, arguments->overrides);
    const pe::ScopedJaxRelease release = engine_trainer::case_jax_release(spec);
    if (arguments->sharded) {
      print_sharded_programs(sharded_cases(arguments->case_name, arguments->overrides, spec));
      return;
    }
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
