#include "programs/program_parts.h"

#include <fmt/format.h>

#include "models/model.h"
#include "parity/common/dataset.h"
#include "parity/common/error.h"
#include "parity/common/init_params.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/jax_release.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/pmap.h"
#include "step_plan.h"

namespace parity::engine_trainer {
namespace {

constexpr const char* kAxis = "data";

// value_and_grad(loss_fn, has_aux), then `reduce` over the grads; the loss stays per device.
MappedGradients reduced_after_grad(const std::string& axis_name, const pe::TreeFunction& loss_fn,
                                   bool has_aux,
                                   std::function<pe::Tree(const pe::Tree&)> reduce) {
  return {axis_name, pe::value_and_grad(loss_fn, {0}, has_aux), std::move(reduce)};
}

pe::Tree unreduced(const pe::Tree& grads) { return grads; }

}  // namespace

pe::TreeFunction MappedGradients::loss_and_reduced_grads() const {
  return [local = local, reduce = reduce](const std::vector<pe::Tree>& args) {
    const pe::Tree loss_and_grads = local(args);
    return pe::Tree::tuple({loss_and_grads[0], reduce(loss_and_grads[1])});
  };
}

MappedGradients mapped_gradients(const EngineProgram& program, const pe::TreeFunction& loss_fn,
                                 bool has_aux) {
  if (has_aux && !program.trains_layer_models) {
    throw InternalError("engine program '" + program.name +
                        "' trains widths models only, so its loss has no aux output");
  }
  switch (program.reduction) {
    case GradientReduction::kPmean:
      // 002 §2.1: grads = lax.pmean(grads, axis_name='data').
      return reduced_after_grad(kAxis, loss_fn, has_aux,
                                [](const pe::Tree& grads) { return pe::pmean(grads, kAxis); });
    case GradientReduction::kPsum:
      // 000 §4.3 without the division: the sum over devices, N times DDP's average.
      return reduced_after_grad(kAxis, loss_fn, has_aux,
                                [](const pe::Tree& grads) { return pe::psum(grads, kAxis); });
    case GradientReduction::kPsumThenDivide:
      // 000 §4.3: grads = lax.psum(grads, ...); grads = tree.map(lambda g: g / device_count(), ...)
      return reduced_after_grad(kAxis, loss_fn, has_aux, [](const pe::Tree& grads) {
        const auto devices = static_cast<double>(pe::axis_size(kAxis));
        return pe::tree_map([devices](const pe::Array& g) { return g / devices; },
                            pe::psum(grads, kAxis));
      });
    case GradientReduction::kPsumInsideLoss: {
      // 000 §5.2: def loss_fn_with_psum(params, x, y):
      //               return lax.psum(loss_fn(params, x, y), axis_name='data')
      //           grads = grad(loss_fn_with_psum)(params, x, y)      # no reduction after grad
      const pe::TreeFunction loss_fn_with_psum = [loss_fn](const std::vector<pe::Tree>& args) {
        return pe::Tree(pe::psum(loss_fn(args).leaf(), kAxis));
      };
      return {kAxis, pe::value_and_grad(loss_fn_with_psum), unreduced};
    }
    case GradientReduction::kNone:
      // 002's table: gradients not reduced before the update; each device steps on its own.
      return {kAxis, pe::value_and_grad(loss_fn, {0}, has_aux), unreduced};
    case GradientReduction::kMismatchedAxisNames:
      // 000 §5.1: pmap(axis_name='batch'), then psum(..., axis_name='devices').
      return reduced_after_grad("batch", loss_fn, has_aux,
                                [](const pe::Tree& grads) { return pe::pmean(grads, "devices"); });
  }
  throw InternalError("engine program '" + program.name + "' has no gradient reduction");
}

pe::TreeFunction case_loss(const CaseSpec& spec) { return mlp_loss_fn(spec.model); }

pe::Tree case_params(const CaseSpec& spec) {
  return params_from_tensors(init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale));
}

GlobalBatch global_samples(const CaseSpec& spec, const std::string& program, int64_t count) {
  const Dataset train = load_case_dataset(spec, "train");
  if (train.labels.empty()) {
    throw InputError(
        fmt::format("case {}: engine program {} needs a classification dataset "
                    "(fashion-mnist), found {}",
                    spec.name, program, spec.data.dataset));
  }
  if (count > train.num_samples) {
    throw InputError(fmt::format("case {}: engine program {} needs {} samples, the dataset has {}",
                                 spec.name, program, count, train.num_samples));
  }
  const std::vector<float> features(train.features.begin(),
                                    train.features.begin() + count * train.feature_dim);
  const std::vector<int32_t> labels(train.labels.begin(), train.labels.begin() + count);
  return {pe::Array::from_floats({count, train.feature_dim}, features),
          pe::Array::from_ints({count}, labels)};
}

MappedBatch first_samples(const CaseSpec& spec, const std::string& program, int64_t mapped,
                          int64_t per_device) {
  const GlobalBatch batch = global_samples(spec, program, mapped * per_device);
  return {pe::reshape(batch.x, {mapped, per_device, batch.x.shape()[1]}),
          pe::reshape(batch.y, {mapped, per_device})};
}

std::optional<std::string> run_error_program(const CaseSpec& spec) {
  const pe::ScopedJaxRelease release = case_jax_release(spec);
  const EngineProgram& program = find_engine_program(spec.scenario.engine_program);
  require_program_trains_model(spec, program);
  if (program.kind != ProgramKind::kFailsBeforeTraining) {
    throw InternalError("engine program '" + program.name + "' is not an error program");
  }
  if (program.jit != JitShardings::kNotJit) return run_sharded_jit_program(spec, program);
  // One batch per device, or 65 samples for batch-65-on-8: the global batch 001 §1 feeds to
  // pmap as it is.
  const bool global_65 = program.feeds_65_samples_to_8_devices;
  return run_mapped_step(spec, program, global_65 ? 65 : spec.parallel.replicas,
                         global_65 ? 1 : spec.data.per_replica_batch);
}

pe::PmapOptions broadcast_params_options(const CaseSpec& spec, const std::string& axis_name) {
  pe::PmapOptions options;
  options.axis_name = axis_name;
  options.in_axes = {std::nullopt, 0, 0};
  options.devices = pe::DeviceSet(static_cast<int>(spec.parallel.replicas));
  return options;
}

std::optional<std::string> engine_error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const pe::EngineError& error) {
    return std::string(error.what());
  }
  return std::nullopt;
}

std::optional<std::string> run_mapped_step(const CaseSpec& spec, const EngineProgram& program,
                                           int64_t mapped, int64_t per_device) {
  const MappedGradients gradients = mapped_gradients(program, case_loss(spec));
  const MappedBatch batch = first_samples(spec, program.name, mapped, per_device);
  return engine_error_of([&] {
    pe::pmap(gradients.loss_and_reduced_grads(),
             broadcast_params_options(spec, gradients.axis_name))(
        {case_params(spec), batch.x, batch.y});
  });
}

}  // namespace parity::engine_trainer
