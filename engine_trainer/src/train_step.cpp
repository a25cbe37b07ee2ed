// The training step under pmap: the case's loss, the engine program's gradient reduction (the
// faithful pmean or one of the documents' variants), the optax update, and gradient
// accumulation over micro-batches.
#include "mlp_program.h"
#include "parity/common/engine_programs.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "pmap_engine/ops.h"
#include "scenario_programs.h"

namespace parity::engine_trainer {

pe::Pmapped make_pmap_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                 const EngineStepOptions& step_options) {
  const ModelSpec model = spec.model;
  const pe::DType dtype =
      step_options.float64 ? pe::DType::f64 : cases::compute_dtype(spec.train.dtype);
  const pe::optim::GradientTransformation optimizer = cases::make_optimizer(spec.train);
  const EngineProgram& program = find_engine_program(step_options.program);
  const bool cast_loss = !program.keeps_loss_in_compute_dtype;
  pe::TreeFunction loss_fn = [model, dtype, cast_loss](const std::vector<pe::Tree>& args) {
    return pe::Tree(
        cases::mlp_loss(model, args[0], args[1].leaf(), args[2].leaf(), dtype, cast_loss));
  };
  const cases::MappedGradients gradients = cases::mapped_gradients(program, loss_fn);
  const int64_t micro_batches = spec.train.grad_accum_steps;
  const bool update_each = program.updates_per_micro_batch;
  pe::TreeFunction step = [optimizer, gradients, micro_batches,
                           update_each](const std::vector<pe::Tree>& args) {
    pe::Tree params = args[0];
    pe::Tree state = args[1];
    const auto update = [&](const pe::Tree& grads) {
      auto [updates, new_state] = optimizer.update(grads, state, params);
      params = pe::optim::apply_updates(params, updates);
      state = new_state;
    };
    if (micro_batches == 1) {
      // Seed 002's train_step_parallel: the program's (loss, grads), then the optax update.
      const pe::Tree loss_and_grads = gradients.local({params, args[2], args[3]});
      const pe::Tree grads = gradients.reduce(loss_and_grads[1]);
      update(grads);
      return pe::Tree::tuple({params, state, loss_and_grads[0], grads});
    }
    // Micro-batches: args[2] and args[3] are tuples of k batches. 002 §3.3 accumulates the
    // gradients (each of loss / k, as DDP scales the loss under no_sync), reduces once and
    // updates once; the P9 program updates after every micro-batch instead.
    const auto k = static_cast<double>(micro_batches);
    std::vector<pe::Tree> losses;  // per micro-batch: the host weighs them by their sizes
    pe::Tree accumulated;
    pe::Tree last_grads;
    for (int64_t m = 0; m < micro_batches; ++m) {
      const auto index = static_cast<size_t>(m);
      const pe::Tree loss_and_grads = gradients.local({params, args[2][index], args[3][index]});
      losses.push_back(loss_and_grads[0]);
      if (update_each) {
        last_grads = gradients.reduce(loss_and_grads[1]);
        update(last_grads);
        continue;
      }
      const pe::Tree scaled =
          pe::tree_map([k](const pe::Array& g) { return g / k; }, loss_and_grads[1]);
      accumulated = m == 0
                        ? scaled
                        : pe::tree_map([](const pe::Array& a, const pe::Array& g) { return a + g; },
                                       accumulated, scaled);
    }
    if (!update_each) {
      last_grads = gradients.reduce(accumulated);
      update(last_grads);
    }
    return pe::Tree::tuple({params, state, pe::Tree::tuple(losses), last_grads});
  };
  pe::PmapOptions options;
  options.axis_name = gradients.axis_name;
  if (program.broadcasts_params) {
    // 000 §5.3: @pmap(axis_name=..., in_axes=(None, 0, 0)): params and optimizer state go to
    // every device whole and come back as the one value all devices hold (out_axes=None, which
    // the engine checks bit for bit).
    options.in_axes = {std::nullopt, std::nullopt, 0, 0};
    options.out_axes = {std::nullopt, std::nullopt, 0, 0};
  }
  options.donate_argnums = {0, 1};
  options.devices = devices;
  if (step_options.check_replicas) options.check_replicated_outputs = {0, 1};
  return pe::pmap(step, options);
}

}  // namespace parity::engine_trainer
