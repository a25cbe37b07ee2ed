// The traced train step's signature: its arguments and results by name, and their places in the
// positional trees the step is traced with,
//
//   train_step(params, opt_state, x, y[, batch_stats][, dropout_key])
//       -> (params, opt_state, loss, grads[, batch_stats][, dropout_draws])
//
// (make_pmap_train_step, engine_trainer.h): batch_stats for a layers model (its BatchNorm
// statistics, the step's model state), the dropout key and the draws for a model with dropout.
// StepSignature is the one place that knows those positions; everything else reads the names.
#pragma once

#include <set>
#include <vector>

#include "pmap_engine/tree.h"

namespace parity::engine_trainer {

namespace pe = pmap_engine;

// The step's arguments, or anything given per argument (pmap's in_axes, shard_map's in_specs,
// jit's in_shardings). model_state and dropout_key are read only when the step takes them.
template <typename T>
struct StepArgumentsOf {
  T params;
  T opt_state;
  T x;  // the inputs: a batch, or with train.grad_accum_steps = k a tuple of k micro-batches
  T y;  // the targets, likewise
  T model_state;
  T dropout_key;
};
using StepArguments = StepArgumentsOf<pe::Tree>;

// The step's results, or anything given per result (out_axes, out_specs, out_shardings).
template <typename T>
struct StepResultsOf {
  T params;
  T opt_state;
  T loss;   // a device's loss, or a tuple with one per micro-batch
  T grads;  // with clipping the pair (applied, reduced): StepSignature::applied_grads
  T model_state;
  T dropout_draws;  // each dropout site's (key, keep mask) by its path
};
using StepResults = StepResultsOf<pe::Tree>;

// One batch's loss and gradients as value_and_grad returns them, with a layers model's aux:
// its updated batch statistics and its dropout draws.
struct LossAndGrads {
  pe::Tree loss;
  pe::Tree grads;
  pe::Tree model_state;
  pe::Tree dropout_draws;
};

// One dropout site's draw in the step's results: the site's key and its keep mask.
struct DropoutDraw {
  pe::Array key;
  pe::Array keep;
};

class StepSignature {
 public:
  // `has_model_state`: a layers model (its loss has the aux output); `has_dropout`: the step
  // takes a key and returns the draws; `clips`: the step returns (applied, reduced) gradients.
  StepSignature(bool has_model_state, bool has_dropout, bool clips);

  bool has_model_state() const { return has_model_state_; }
  bool has_dropout() const { return has_dropout_; }
  bool clips() const { return clips_; }

  // The positional argument list, and its inverse.
  template <typename T>
  std::vector<T> arguments(const StepArgumentsOf<T>& named) const {
    return with_optional({named.params, named.opt_state, named.x, named.y}, named.model_state,
                         named.dropout_key);
  }
  StepArguments arguments(const std::vector<pe::Tree>& list) const;
  // The positions of params and opt_state, the state the step donates.
  std::set<size_t> state_argnums() const;

  // The positional result list (the step returns it as a tuple), and its inverse.
  template <typename T>
  std::vector<T> results(const StepResultsOf<T>& named) const {
    return with_optional({named.params, named.opt_state, named.loss, named.grads},
                         named.model_state, named.dropout_draws);
  }
  pe::Tree result_tuple(const StepResults& named) const;
  StepResults results(const pe::Tree& tuple) const;

  // The gradients the step returns: the applied ones, paired with the reduced ones when the
  // step clips (the run records the applied gradients, as DDP's .grad holds them after
  // clip_grad_norm_, and the norm of the reduced ones, as clip_grad_norm_ returns it).
  pe::Tree returned_grads(const pe::Tree& applied, const pe::Tree& reduced) const;
  pe::Tree applied_grads(const pe::Tree& returned) const;
  pe::Tree reduced_grads(const pe::Tree& returned) const;

  // The loss function's arguments, (params, x, y[, batch_stats][, dropout_key])
  // (layer_model_loss), and its value_and_grad's result by name.
  std::vector<pe::Tree> loss_arguments(const pe::Tree& params, const pe::Tree& x,
                                       const pe::Tree& y, const pe::Tree& model_state,
                                       const pe::Tree& dropout_key) const;
  LossAndGrads loss_and_grads(const pe::Tree& value_and_grad_result) const;

  // A site's draw in dropout_draws.
  static DropoutDraw dropout_draw(const pe::Tree& site_draw);

 private:
  // `list`, then the model state where the step has one and the dropout entry where it has
  // dropout: the order of every list the step takes or returns.
  template <typename T>
  std::vector<T> with_optional(std::vector<T> list, const T& model_state,
                               const T& dropout) const {
    if (has_model_state_) list.push_back(model_state);
    if (has_dropout_) list.push_back(dropout);
    return list;
  }

  bool has_model_state_;
  bool has_dropout_;
  bool clips_;
};

}  // namespace parity::engine_trainer
