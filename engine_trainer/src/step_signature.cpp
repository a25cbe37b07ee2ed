#include "step_signature.h"

#include <utility>

namespace parity::engine_trainer {
namespace {

// Positions in the step's arguments and results, and in value_and_grad's results.
constexpr size_t kParams = 0, kOptState = 1, kX = 2, kY = 3, kModelState = 4, kDropout = 5;
constexpr size_t kLoss = 2, kGrads = 3;
constexpr size_t kValue = 0, kValueGrads = 1;

}  // namespace

StepSignature::StepSignature(bool has_model_state, bool has_dropout, bool clips)
    : has_model_state_(has_model_state), has_dropout_(has_dropout), clips_(clips) {}

StepArguments StepSignature::arguments(const std::vector<pe::Tree>& list) const {
  StepArguments named{list[kParams], list[kOptState], list[kX], list[kY], pe::Tree(), pe::Tree()};
  if (has_model_state_) named.model_state = list[kModelState];
  if (has_dropout_) named.dropout_key = list[kDropout];
  return named;
}

std::set<size_t> StepSignature::state_argnums() const { return {kParams, kOptState}; }

pe::Tree StepSignature::result_tuple(const StepResults& named) const {
  return pe::Tree::tuple(results(named));
}

StepResults StepSignature::results(const pe::Tree& tuple) const {
  StepResults named{tuple[kParams], tuple[kOptState], tuple[kLoss], tuple[kGrads], pe::Tree(),
                    pe::Tree()};
  if (has_model_state_) named.model_state = tuple[kModelState];
  if (has_dropout_) named.dropout_draws = tuple[kDropout];
  return named;
}

pe::Tree StepSignature::returned_grads(const pe::Tree& applied, const pe::Tree& reduced) const {
  return clips_ ? pe::Tree::tuple({applied, reduced}) : applied;
}

pe::Tree StepSignature::applied_grads(const pe::Tree& returned) const {
  return clips_ ? returned[0] : returned;
}

pe::Tree StepSignature::reduced_grads(const pe::Tree& returned) const {
  return clips_ ? returned[1] : returned;
}

std::vector<pe::Tree> StepSignature::loss_arguments(const pe::Tree& params, const pe::Tree& x,
                                                    const pe::Tree& y,
                                                    const pe::Tree& model_state,
                                                    const pe::Tree& dropout_key) const {
  return with_optional({params, x, y}, model_state, dropout_key);
}

LossAndGrads StepSignature::loss_and_grads(const pe::Tree& value_and_grad_result) const {
  const pe::Tree& value = value_and_grad_result[kValue];
  const pe::Tree& grads = value_and_grad_result[kValueGrads];
  if (!has_model_state_) return {value, grads, pe::Tree(), pe::Tree()};
  // A layers model's loss_fn returns (loss, (batch_stats, dropout_draws)) (layer_model_loss).
  const pe::Tree& aux = value[1];
  return {value[0], grads, aux[0], aux[1]};
}

DropoutDraw StepSignature::dropout_draw(const pe::Tree& site_draw) {
  return {site_draw[0].leaf(), site_draw[1].leaf()};
}

}  // namespace parity::engine_trainer
