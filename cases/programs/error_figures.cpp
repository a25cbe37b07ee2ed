// The figures an error case's fact-check quotes besides the error text (scenario_programs.h,
// error_program_figures).
#include "parity/common/distributed_sampler.h"
#include "scenario_programs.h"

namespace parity::cases {

std::string jax_part(const std::string& engine_error) {
  return engine_error.substr(0, engine_error.find(" (pmap_engine: "));
}

ObservedFigures error_program_figures(const CaseSpec& spec) {
  const pe::ScopedJaxRelease release = case_jax_release(spec);
  const EngineProgram& program = find_engine_program(spec.scenario.engine_program);
  ObservedFigures figures;
  if (!program.feeds_65_samples_to_8_devices) return figures;
  // P6 (001 §1): the document says 64 is fine where 65 fails. pmap maps the leading axis onto
  // the devices, so a leading 64 is no batch of 64 samples either.
  constexpr int64_t kFed = 65;
  const int64_t devices = spec.parallel.replicas;
  figures.set("leading_axis", static_cast<double>(kFed));
  figures.set("devices", static_cast<double>(devices));
  figures.set("leading_axis_below", static_cast<double>(kFed - 1));
  const std::optional<std::string> below = run_mapped_step(spec, program, kFed - 1, 1);
  figures.set_text("error_below", jax_part(below.value_or("none: the step ran")));
  // What DDP's DistributedSampler does with the same samples instead: pads to a multiple of the
  // rank count by repeating the first ones (torch.utils.data.DistributedSampler.__iter__).
  DistributedSamplerOptions options;
  options.dataset_size = kFed;
  options.num_replicas = devices;
  options.shuffle = false;
  const DistributedSampler sampler(options);
  figures.set("sampler_per_rank", static_cast<double>(sampler.num_samples()));
  figures.set("sampler_repeated", static_cast<double>(sampler.total_size() - kFed));
  return figures;
}

}  // namespace parity::cases
