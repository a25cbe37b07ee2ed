// The figures an error case's fact-check quotes besides the error text (scenario_programs.h,
// error_program_figures).
#include "parity/common/distributed_sampler.h"
#include "programs/program_parts.h"

namespace parity::engine_trainer {

std::string jax_part(const std::string& engine_error) {
  return engine_error.substr(0, engine_error.find(" (pmap_engine: "));
}

namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

}  // namespace

std::string jax_quote(const std::string& engine_error) {
  const std::string jax = jax_part(engine_error);
  // jax-v0.11.0 jax/_src/pjit.py pjit_check_aval_sharding: after the IndivisibleError of
  // jax/_src/sharding.py _common_shard_shape ("... implies that array axis ...") and a period,
  // " This error occurs at source: " and the summary of the Python line being traced
  // (source_info_util.summarize). jax-v0.4.38's text ("which implies that the global size ...")
  // ends where the engine's does.
  if (starts_with(jax, "One of ") && jax.find(" implies that array axis ") != std::string::npos) {
    return jax + " This error occurs at source: …";
  }
  // jax/_src/errors.py TracerArrayConversionError.__init__ (jax-v0.4.38 and jax-v0.11.0): the
  // tracer's _origin_msg follows its _error_repr with no space between (the function being
  // traced and the argument the value depends on), then _JAXErrorMixin's "\nSee " and the
  // errors page.
  if (starts_with(jax, "The numpy.ndarray conversion method __array__() was called on ")) {
    return jax + "…";
  }
  // jax/_src/errors.py ConcretizationTypeError.__init__ (both tags): the opening is JAX's, what
  // follows the colon is the engine's own description of the tracer.
  const std::string concretization =
      "Abstract tracer value encountered where concrete value is expected: ";
  if (starts_with(jax, concretization)) return concretization + "…";
  return jax;
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
  figures.set_text("error_below", jax_quote(below.value_or("none: the step ran")));
  // What DDP's DistributedSampler does with the same samples instead: pads to a multiple of the
  // rank count by repeating the first ones (torch.utils.data.DistributedSampler.__iter__).
  DistributedSamplerOptions options;
  options.dataset_size = kFed;
  options.num_replicas = devices;
  options.shuffle = false;
  const DistributedSampler sampler(options);
  figures.set("sampler_per_rank", static_cast<double>(sampler.num_samples()));
  figures.set("sampler_total", static_cast<double>(sampler.total_size()));
  // Repeated in all, over the ranks together (not per rank): total_size - the samples fed.
  figures.set("sampler_repeated", static_cast<double>(sampler.total_size() - kFed));
  return figures;
}

}  // namespace parity::engine_trainer
