// The training step: the case's loss, the engine program's gradient reduction (the faithful
// pmean or one of the documents' variants), the optax update, and gradient accumulation over
// micro-batches; mapped over the devices by pmap here, or by shard_map
// (shard_map_train_step.cpp); or the same step over the global batch without a reduction,
// jitted with shardings (jit_train_step.cpp). A layers model's BatchNorm statistics are the
// step's model state, as a Flax user threads them: (loss, batch_stats), grads =
// value_and_grad(loss_fn, has_aux=True)(params, x, y, batch_stats), with each device keeping
// its own statistics unless a BatchNorm syncs them over "data". A model with dropout takes the
// step's dropout key as its last argument and derives each device's key as the case's [rng]
// says, and the step returns every site's keys and masks for the RNG streams.
#include "train_step.h"

#include <utility>

#include "parity/common/error.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/random_ops.h"

namespace parity::engine_trainer {

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
// the applied gradients are the reduced ones.
struct GradientPath {
  std::function<pe::Tree(const pe::Tree&)> reduce;
  double clip_norm = 0;
  bool clip_before_mean = false;

  pe::Tree clip(const pe::Tree& grads) const {
    const pe::optim::GradientTransformation clipper = pe::optim::clip_by_global_norm(clip_norm);
    return clipper.update(grads, clipper.init(grads), pe::Tree()).first;
  }
  // The optimizer's input, and the reduced gradients before any clipping.
  std::pair<pe::Tree, pe::Tree> apply(const pe::Tree& local) const {
    const pe::Tree reduced = reduce(local);
    if (clip_norm <= 0) return {reduced, reduced};
    // before_mean: each device's own gradient clipped inside the mapped step, then the mean
    // (a port's misplacement; DDP averages in backward's hooks before any clipping).
    const pe::Tree applied = clip_before_mean ? reduce(clip(local)) : clip(reduced);
    return {applied, reduced};
  }
};

// What the step is made of: the update, the gradients with their reduction, and how the
// micro-batches and the clipping go. Copied into the step function: nothing refers to the plan.
struct StepParts {
  pe::optim::GradientTransformation optimizer;
  MappedGradients gradients;
  GradientPath path;
  StepSignature signature;
  int64_t micro_batches = 1;
  bool update_each = false;  // P9: an update after every micro-batch
  RngSpec rng;
};

// The step's parts around `gradients`, the plan's.
StepParts step_parts(const EngineStepPlan& plan, MappedGradients gradients) {
  const TrainSpec& train = plan.spec.train;
  const GradientPath path{gradients.reduce, train.clip_grad_norm,
                          train.clip_placement == "before_mean"};
  return {plan.optimizer,
          std::move(gradients),
          path,
          plan.signature,
          train.grad_accum_steps,
          plan.program.updates_per_micro_batch,
          plan.spec.rng};
}

pe::TreeFunction step_function(const StepParts& parts) {
  return [parts](const std::vector<pe::Tree>& arguments) {
    const StepSignature& signature = parts.signature;
    const StepArguments in = signature.arguments(arguments);
    StepResults out{in.params, in.opt_state, pe::Tree(), pe::Tree(), in.model_state,
                    pe::Tree::dict({})};
    const auto update = [&](const pe::Tree& grads) {
      auto [updates, new_state] = parts.optimizer.update(grads, out.opt_state, out.params);
      out.params = pe::optim::apply_updates(out.params, updates);
      out.opt_state = new_state;
    };
    // One batch's loss and local grads; a layers model's forward also updates its batch
    // statistics and draws the dropout masks.
    const auto loss_and_grads = [&](const pe::Tree& x, const pe::Tree& y) {
      const pe::Tree key =
          signature.has_dropout()
              ? pe::Tree(device_dropout_key(parts.rng, in.dropout_key.leaf(),
                                            parts.gradients.axis_name))
              : pe::Tree();
      const LossAndGrads local = signature.loss_and_grads(parts.gradients.local(
          signature.loss_arguments(out.params, x, y, out.model_state, key)));
      if (signature.has_model_state()) {
        out.model_state = local.model_state;
        out.dropout_draws = local.dropout_draws;
      }
      return local;
    };
    // The update from a batch's (or the accumulated) local gradients; the gradients the step
    // returns.
    const auto apply = [&](const pe::Tree& local_grads) {
      const auto [applied, reduced] = parts.path.apply(local_grads);
      update(applied);
      out.grads = signature.returned_grads(applied, reduced);
    };
    if (parts.micro_batches == 1) {
      // Seed 002's train_step_parallel: the program's (loss, grads), then the optax update.
      const LossAndGrads local = loss_and_grads(in.x, in.y);
      apply(local.grads);
      out.loss = local.loss;
      return signature.result_tuple(out);
    }
    // Micro-batches: x and y are tuples of k batches. 002 §3.3 accumulates the gradients (each
    // of loss / k, as DDP scales the loss under no_sync), reduces once and updates once; the P9
    // program updates after every micro-batch instead.
    const auto k = static_cast<double>(parts.micro_batches);
    const std::vector<pe::Tree> xs = in.x.children();
    const std::vector<pe::Tree> ys = in.y.children();
    std::vector<pe::Tree> losses;  // per micro-batch: the host weighs them by their sizes
    pe::Tree accumulated;
    for (size_t m = 0; m < xs.size(); ++m) {
      const LossAndGrads local = loss_and_grads(xs.at(m), ys.at(m));
      losses.push_back(local.loss);
      if (parts.update_each) {
        apply(local.grads);
        continue;
      }
      const pe::Tree scaled = pe::tree_map([k](const pe::Array& g) { return g / k; }, local.grads);
      accumulated = m == 0
                        ? scaled
                        : pe::tree_map([](const pe::Array& a, const pe::Array& g) { return a + g; },
                                       accumulated, scaled);
    }
    if (!parts.update_each) apply(accumulated);
    out.loss = pe::Tree::tuple(losses);
    return signature.result_tuple(out);
  };
}

}  // namespace

pe::TreeFunction device_step_function(const EngineStepPlan& plan) {
  return step_function(step_parts(plan, plan.gradients));
}

pe::TreeFunction global_step_function(const EngineStepPlan& plan) {
  if (plan.signature.has_dropout()) {
    throw InternalError("case " + plan.spec.name +
                        ": a jit style with dropout passed case validation");
  }
  // The loss is the global batch's mean, so its gradient is the global gradient: nothing to
  // reduce (the partitioner's collectives do what pmean does under pmap). The plan's program is
  // the faithful one (make_jit_train_step checks it): its loss cast back to the master dtype,
  // one update per step.
  MappedGradients gradients{
      "", pe::value_and_grad(plan.loss_fn, {0}, plan.signature.has_model_state()),
      [](const pe::Tree& grads) { return grads; }};
  return step_function(step_parts(plan, std::move(gradients)));
}

pe::Pmapped make_pmap_train_step(const EngineStepPlan& plan, const pe::DeviceSet& devices) {
  pe::PmapOptions options;
  options.axis_name = plan.gradients.axis_name;
  const StepSignature& signature = plan.signature;
  const pe::AxisSpec mapped(0), whole(std::nullopt);
  if (plan.program.broadcasts_params) {
    // 000 §5.3: @pmap(axis_name=..., in_axes=(None, 0, 0)): params and optimizer state go to
    // every device whole and come back as the one value all devices hold (out_axes=None, which
    // the engine checks bit for bit).
    options.in_axes =
        signature.arguments<pe::AxisSpec>({whole, whole, mapped, mapped, mapped, mapped});
    options.out_axes =
        signature.results<pe::AxisSpec>({whole, whole, mapped, mapped, mapped, mapped});
  }
  if (signature.has_dropout()) {
    // The step key goes to every device whole (in_axes=None) unless each device gets its row
    // of split(key, n).
    options.in_axes = signature.arguments<pe::AxisSpec>(
        {mapped, mapped, mapped, mapped, mapped,
         plan.spec.rng.per_device == "split" ? mapped : whole});
  }
  options.donate_argnums = signature.state_argnums();
  options.devices = devices;
  if (plan.options.check_replicas) options.check_replicated_outputs = signature.state_argnums();
  return pe::pmap(device_step_function(plan), options);
}

pe::Pmapped make_pmap_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                 const EngineStepOptions& step_options) {
  return make_pmap_train_step(EngineStepPlan(spec, step_options), devices);
}

}  // namespace parity::engine_trainer
