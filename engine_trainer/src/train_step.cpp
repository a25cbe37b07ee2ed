// The training step: the case's loss, the engine program's gradient reduction (the faithful
// pmean or one of the documents' variants), the optax update, and gradient accumulation over
// micro-batches; mapped over the devices by pmap here, or by shard_map
// (shard_map_train_step.cpp); or the same step over the global batch without a reduction,
// jitted with shardings (jit_train_step.cpp). A layers model's BatchNorm statistics are the
// step's model state, as a Flax user threads them: (loss, batch_stats), grads =
// value_and_grad(loss_fn, has_aux=True)(params, x, y, batch_stats), with each device keeping
// its own statistics unless a BatchNorm syncs them over "data". A model with dropout takes the step's dropout key as its
// last argument and derives each device's key as the case's [rng] says, and the step returns
// every site's keys and masks for the RNG streams.
#include "train_step.h"

#include <functional>
#include <utility>

#include "models/layer_model.h"
#include "models/mlp_program.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/random_ops.h"
#include "programs/program_parts.h"

namespace parity::engine_trainer {

namespace {

// The case's loss_fn: (params, x, y) -> loss for a widths model; for a layers model
// (params, x, y, batch_stats) -> (loss, new batch_stats), differentiated with has_aux.
pe::TreeFunction case_loss_fn(const CaseSpec& spec, pe::DType dtype, bool cast_loss) {
  const ModelSpec model = spec.model;
  if (!model.layers.empty()) return layer_model_loss(model);
  return [model, dtype, cast_loss](const std::vector<pe::Tree>& args) {
    return pe::Tree(mlp_loss(model, args[0], args[1].leaf(), args[2].leaf(), dtype, cast_loss));
  };
}

}  // namespace

namespace {

// The device's "dropout" rng from the step's key argument (rng.per_device): fold_in(key,
// axis_index) inside the step, the device's row of split(key, n) (passed mapped, already the
// row), or the one key every device was given (P5).
pe::Array device_dropout_key(const RngSpec& rng, const pe::Array& key, const std::string& axis) {
  if (rng.per_device == "fold_in") return pe::random::fold_in(key, pe::axis_index(axis));
  return key;
}

// The gradients the optimizer applies, from a device's local gradients: the program's
// reduction, and the case's clipping by global norm where the case places it. Without clipping
// the applied gradients are the reduced ones; with it, (applied, reduced): the run records the
// applied gradients, as DDP's .grad holds them after clip_grad_norm_, and the norm of the
// reduced ones, as clip_grad_norm_ returns it.
struct GradientPath {
  std::function<pe::Tree(const pe::Tree&)> reduce;
  double clip_norm = 0;
  bool clip_before_mean = false;

  pe::Tree clip(const pe::Tree& grads) const {
    const pe::optim::GradientTransformation clipper = pe::optim::clip_by_global_norm(clip_norm);
    return clipper.update(grads, clipper.init(grads), pe::Tree()).first;
  }
  // The optimizer's input and what the step returns as its gradients.
  std::pair<pe::Tree, pe::Tree> apply(const pe::Tree& local) const {
    const pe::Tree reduced = reduce(local);
    if (clip_norm <= 0) return {reduced, reduced};
    // before_mean: each device's own gradient clipped inside the mapped step, then the mean
    // (a port's misplacement; DDP averages in backward's hooks before any clipping).
    const pe::Tree applied = clip_before_mean ? reduce(clip(local)) : clip(reduced);
    return {applied, pe::Tree::tuple({applied, reduced})};
  }
};

}  // namespace

pe::optim::GradientTransformation step_optimizer(const CaseSpec& spec) {
  return make_optimizer(spec.train, /*clips=*/false);
}

namespace {

// What the step is made of: the update, the gradients with their reduction, and how the
// micro-batches and the clipping go.
struct StepParts {
  pe::optim::GradientTransformation optimizer;
  MappedGradients gradients;
  GradientPath path;
  int64_t micro_batches = 1;
  bool update_each = false;  // P9: an update after every micro-batch
  bool has_model_state = false;
  bool has_dropout = false;
  RngSpec rng;
};

// The step's parts around `gradients`, the case's and the program's.
StepParts step_parts(const CaseSpec& spec, const EngineProgram& program,
                     MappedGradients gradients) {
  const GradientPath path{gradients.reduce, spec.train.clip_grad_norm,
                          spec.train.clip_placement == "before_mean"};
  return {step_optimizer(spec),
          std::move(gradients),
          path,
          spec.train.grad_accum_steps,
          program.updates_per_micro_batch,
          !spec.model.layers.empty(),
          has_dropout(spec.model),
          spec.rng};
}

pe::TreeFunction step_function(const StepParts& parts) {
  return [parts](const std::vector<pe::Tree>& args) {
    const pe::optim::GradientTransformation& optimizer = parts.optimizer;
    const MappedGradients& gradients = parts.gradients;
    const GradientPath& path = parts.path;
    const int64_t micro_batches = parts.micro_batches;
    const bool has_model_state = parts.has_model_state;
    const bool has_dropout = parts.has_dropout;
    pe::Tree params = args[0];
    pe::Tree state = args[1];
    pe::Tree batch_stats = has_model_state ? args[4] : pe::Tree();
    pe::Tree dropout_draws = pe::Tree::dict({});
    const auto update = [&](const pe::Tree& grads) {
      auto [updates, new_state] = optimizer.update(grads, state, params);
      params = pe::optim::apply_updates(params, updates);
      state = new_state;
    };
    // One batch's (loss, local grads); a layers model's forward also updates batch_stats and
    // draws the dropout masks.
    const auto loss_and_grads = [&](const pe::Tree& x, const pe::Tree& y) {
      if (!has_model_state) return gradients.local({params, x, y});
      std::vector<pe::Tree> loss_args = {params, x, y, batch_stats};
      if (has_dropout) {
        loss_args.emplace_back(
            device_dropout_key(parts.rng, args[5].leaf(), gradients.axis_name));
      }
      const pe::Tree out = gradients.local(loss_args);
      batch_stats = out[0][1][0];
      dropout_draws = out[0][1][1];
      return pe::Tree::tuple({out[0][0], out[1]});
    };
    // (params, opt_state, loss, grads), a layers model's new batch_stats, and with dropout the
    // masks' (key, keep) by site.
    const auto outputs = [&](const pe::Tree& loss, const pe::Tree& grads) {
      std::vector<pe::Tree> out = {params, state, loss, grads};
      if (has_model_state) out.push_back(batch_stats);
      if (has_dropout) out.push_back(dropout_draws);
      return pe::Tree::tuple(std::move(out));
    };
    if (micro_batches == 1) {
      // Seed 002's train_step_parallel: the program's (loss, grads), then the optax update.
      const pe::Tree local = loss_and_grads(args[2], args[3]);
      const auto [applied, returned] = path.apply(local[1]);
      update(applied);
      return outputs(local[0], returned);
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
      const pe::Tree local = loss_and_grads(args[2][index], args[3][index]);
      losses.push_back(local[0]);
      if (parts.update_each) {
        const auto [applied, returned] = path.apply(local[1]);
        update(applied);
        last_grads = returned;
        continue;
      }
      const pe::Tree scaled =
          pe::tree_map([k](const pe::Array& g) { return g / k; }, local[1]);
      accumulated = m == 0
                        ? scaled
                        : pe::tree_map([](const pe::Array& a, const pe::Array& g) { return a + g; },
                                       accumulated, scaled);
    }
    if (!parts.update_each) {
      const auto [applied, returned] = path.apply(accumulated);
      update(applied);
      last_grads = returned;
    }
    return outputs(pe::Tree::tuple(losses), last_grads);
  };
}

pe::DType step_dtype(const CaseSpec& spec, const EngineStepOptions& step_options) {
  return step_options.float64 ? pe::DType::f64 : compute_dtype(spec.train.dtype);
}

}  // namespace

DeviceStepFunction device_step_function(const CaseSpec& spec,
                                        const EngineStepOptions& step_options) {
  const EngineProgram& program = find_engine_program(step_options.program);
  require_program_trains_model(spec, program);
  MappedGradients gradients = mapped_gradients(
      program,
      case_loss_fn(spec, step_dtype(spec, step_options), !program.keeps_loss_in_compute_dtype),
      !spec.model.layers.empty());
  const std::string axis_name = gradients.axis_name;
  return {step_function(step_parts(spec, program, std::move(gradients))), axis_name};
}

pe::TreeFunction global_step_function(const CaseSpec& spec,
                                      const EngineStepOptions& step_options) {
  if (has_dropout(spec.model)) {
    throw InternalError("case " + spec.name + ": a jit style with dropout passed case validation");
  }
  // The faithful step's traits: the loss cast back to the master dtype, one update per step.
  const EngineProgram& faithful = find_engine_program("pmean");
  const bool has_aux = !spec.model.layers.empty();
  const pe::TreeFunction loss_fn =
      case_loss_fn(spec, step_dtype(spec, step_options), !faithful.keeps_loss_in_compute_dtype);
  // The loss is the global batch's mean, so its gradient is the global gradient: nothing to
  // reduce (the partitioner's collectives do what pmean does under pmap).
  MappedGradients gradients{"", pe::value_and_grad(loss_fn, {0}, has_aux),
                            [](const pe::Tree& grads) { return grads; }};
  return step_function(step_parts(spec, faithful, std::move(gradients)));
}

pe::Pmapped make_pmap_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                 const EngineStepOptions& step_options) {
  const DeviceStepFunction step = device_step_function(spec, step_options);
  const EngineProgram& program = find_engine_program(step_options.program);
  pe::PmapOptions options;
  options.axis_name = step.axis_name;
  if (program.broadcasts_params) {
    // 000 §5.3: @pmap(axis_name=..., in_axes=(None, 0, 0)): params and optimizer state go to
    // every device whole and come back as the one value all devices hold (out_axes=None, which
    // the engine checks bit for bit).
    options.in_axes = {std::nullopt, std::nullopt, 0, 0};
    options.out_axes = {std::nullopt, std::nullopt, 0, 0};
  }
  if (has_dropout(spec.model)) {
    // The step key goes to every device whole (in_axes=None) unless each device gets its row
    // of split(key, n).
    options.in_axes = {0, 0, 0, 0, 0};
    options.in_axes.push_back(spec.rng.per_device == "split" ? pe::AxisSpec(0)
                                                             : pe::AxisSpec(std::nullopt));
  }
  options.donate_argnums = {0, 1};
  options.devices = devices;
  if (step_options.check_replicas) options.check_replicated_outputs = {0, 1};
  return pe::pmap(step.function, options);
}

}  // namespace parity::engine_trainer
