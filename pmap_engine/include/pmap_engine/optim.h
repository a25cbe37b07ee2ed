// Optimizers with optax's semantics: a GradientTransformation is a pair of pure functions of
// trees, init(params) -> state and update(grads, state, params) -> (updates, new_state), built
// from small transformations with chain(). Everything is written with the public ops, so
// update() traces into a step program (jit / pmap) like the rest of the step.
//
// Sources modelled (google-deepmind/optax commit 2edbcbe):
//   optax/_src/alias.py                 sgd, adam, adamw, rmsprop, adagrad
//   optax/_src/transform.py             scale_by_adam, scale_by_rms, scale_by_rss, scale,
//                                       scale_by_learning_rate, scale_by_schedule
//   optax/transforms/_accumulation.py   trace (momentum)
//   optax/transforms/_adding.py         add_decayed_weights
//   optax/transforms/_clipping.py       clip_by_global_norm
//   optax/transforms/_combining.py      chain
//   optax/_src/update.py                apply_updates
//   optax/schedules/_schedule.py        constant_schedule, cosine_decay_schedule
//   optax/tree_utils/_tree_math.py      update_moment, bias_correction, norm
//   optax/_src/numerics.py              safe_increment
//
// State layout: optax's NamedTuple states as tuples in field order, so a state Tree flattens
// in the same leaf order as optax's state pytree:
//   EmptyState            ()
//   TraceState            (trace,)              trace: a tree shaped like params
//   ScaleByAdamState      (count, mu, nu)       count: i32[]
//   ScaleByRmsState       (nu,)
//   ScaleByRssState       (sum_of_squares,)
//   ScaleByScheduleState  (count,)              count: i32[]
//   chain(a, b, ...)      (state_a, state_b, ...)
// e.g. adam(1e-3).init(params) = ((count, mu, nu), ()).
#pragma once

#include <functional>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "pmap_engine/tree.h"

namespace pmap_engine::optim {

struct GradientTransformation {
  std::function<Tree(const Tree& params)> init;
  // params may be Tree() (none) for transformations that do not read them.
  std::function<std::pair<Tree /*updates*/, Tree /*new_state*/>(
      const Tree& grads, const Tree& state, const Tree& params)>
      update;
};

// A schedule maps the step count (an i32[] array, possibly traced) to a 0-d float array.
using Schedule = std::function<Array(const Array& count)>;

// optax's ScalarOrSchedule: a learning rate that is a number or a schedule.
class ScalarOrSchedule {
 public:
  ScalarOrSchedule(double value) : value_(value) {}  // NOLINT: a number is a rate
  ScalarOrSchedule(Schedule schedule) : schedule_(std::move(schedule)) {}  // NOLINT
  template <typename Fn,
            typename = std::enable_if_t<std::is_invocable_r_v<Array, Fn, const Array&> &&
                                        !std::is_arithmetic_v<std::decay_t<Fn>>>>
  ScalarOrSchedule(Fn fn) : schedule_(Schedule(std::move(fn))) {}  // NOLINT: a lambda

  bool is_schedule() const { return static_cast<bool>(schedule_); }
  double value() const { return value_; }
  const Schedule& schedule() const { return schedule_; }

 private:
  double value_ = 0.0;
  Schedule schedule_;
};

// --- schedules --------------------------------------------------------------------------------

// optax.constant_schedule(value): `value` at every step (an f64 0-d array: a Python float,
// rounded only where it meets the updates' dtype).
Schedule constant_schedule(double value);

// optax.cosine_decay_schedule(init_value, decay_steps, alpha) with exponent 1:
//   init_value * ((1 - alpha) * 0.5 * (1 + cos(pi * min(count, decay_steps) / decay_steps)) +
//   alpha)
// computed in `dtype` (f32: JAX's default; f64: as under jax_enable_x64). decay_steps > 0.
Schedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha = 0.0,
                               DType dtype = DType::f32);

// --- building blocks --------------------------------------------------------------------------

// optax.identity(): updates unchanged, state ().
GradientTransformation identity();
// optax.scale(step_size): updates * step_size, state ().
GradientTransformation scale(double step_size);
// optax.scale_by_schedule(fn): updates * fn(count), state (count,).
GradientTransformation scale_by_schedule(Schedule step_size_fn);
// optax.scale_by_learning_rate(lr, flip_sign): scale(-lr), or scale_by_schedule(-lr(count)).
GradientTransformation scale_by_learning_rate(ScalarOrSchedule learning_rate,
                                              bool flip_sign = true);
// optax.trace(decay, nesterov): t = g + decay * t_prev; updates t (or g + decay * t when
// nesterov). State (trace,).
GradientTransformation trace(double decay, bool nesterov = false);
// optax.scale_by_adam: mu = (1-b1) g + b1 mu, nu = (1-b2) g^2 + b2 nu, count += 1 (i32),
// updates mu_hat / (sqrt(nu_hat + eps_root) + eps) with mu_hat = mu / (1 - b1^count), nu_hat
// likewise. State (count, mu, nu).
GradientTransformation scale_by_adam(double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
                                     double eps_root = 0.0);
// optax.scale_by_rms (bias_correction=False): nu = (1-decay) g^2 + decay nu, starting at
// initial_scale; updates g * rsqrt(nu + eps) when eps_in_sqrt (optax's default), else
// g * 1 / (sqrt(nu) + eps), torch.optim.RMSprop's placement. State (nu,).
GradientTransformation scale_by_rms(double decay = 0.9, double eps = 1e-8,
                                    double initial_scale = 0.0, bool eps_in_sqrt = true);
// optax.scale_by_rss: s = s + g^2, starting at initial_accumulator_value; updates
// g * where(s > 0, rsqrt(s + eps), 0). eps_in_sqrt = false is this engine's extension, not
// optax's: g * where(s > 0, 1 / (sqrt(s) + eps), 0), torch.optim.Adagrad's placement.
// State (sum_of_squares,).
GradientTransformation scale_by_rss(double initial_accumulator_value = 0.1, double eps = 1e-7,
                                    bool eps_in_sqrt = true);
// optax.add_decayed_weights(weight_decay): updates + weight_decay * params (needs params).
// State (). A zero weight_decay leaves updates untouched (no ops), as optax does.
GradientTransformation add_decayed_weights(double weight_decay = 0.0);
// optax.clip_by_global_norm(max_norm): g_norm = sqrt(sum of all squares); each update
// becomes select(g_norm < max_norm, t, (t / g_norm) * max_norm). State ().
GradientTransformation clip_by_global_norm(double max_norm);
// optax.chain(...): applies the transformations in order; state is the tuple of their states.
GradientTransformation chain(std::vector<GradientTransformation> transformations);

// --- optimizers -------------------------------------------------------------------------------

// optax.sgd: chain(trace(momentum, nesterov) if momentum is given else identity(),
// scale_by_learning_rate(lr)). State (TraceState or (), lr state).
GradientTransformation sgd(ScalarOrSchedule learning_rate,
                           std::optional<double> momentum = std::nullopt, bool nesterov = false);
// optax.adam: chain(scale_by_adam(b1, b2, eps, eps_root), scale_by_learning_rate(lr)).
// torch.optim.Adam is eps_root = 0; a nonzero eps_root puts an epsilon inside the sqrt.
GradientTransformation adam(ScalarOrSchedule learning_rate, double b1 = 0.9, double b2 = 0.999,
                            double eps = 1e-8, double eps_root = 0.0);
// optax.adamw: chain(scale_by_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay),
// scale_by_learning_rate(lr)): decoupled weight decay, scaled by the learning rate. Arguments in
// optax's order (optax/_src/alias.py adamw: ..., eps, eps_root, mu_dtype, weight_decay).
GradientTransformation adamw(ScalarOrSchedule learning_rate, double b1 = 0.9, double b2 = 0.999,
                             double eps = 1e-8, double eps_root = 0.0, double weight_decay = 1e-4);

// optax.rmsprop (centered=False, momentum=None, bias_correction=False):
// chain(scale_by_rms(decay, eps, initial_scale, eps_in_sqrt), scale_by_learning_rate(lr)).
// torch.optim.RMSprop(lr, alpha, eps) is decay = alpha, eps_in_sqrt = false.
GradientTransformation rmsprop(ScalarOrSchedule learning_rate, double decay = 0.9,
                               double eps = 1e-8, double initial_scale = 0.0,
                               bool eps_in_sqrt = true);
// optax.adagrad: chain(scale_by_rss(initial_accumulator_value, eps), scale_by_learning_rate(lr)).
// torch.optim.Adagrad(lr, initial_accumulator_value, eps) (lr_decay 0) is eps_in_sqrt = false.
GradientTransformation adagrad(ScalarOrSchedule learning_rate,
                               double initial_accumulator_value = 0.1, double eps = 1e-7,
                               bool eps_in_sqrt = true);

// --- applying and measuring -------------------------------------------------------------------

// optax.apply_updates: params + updates, leaf by leaf, computed in the promoted dtype and cast
// back to each param's dtype.
Tree apply_updates(const Tree& params, const Tree& updates);

// optax.tree.norm: the global L2 norm sqrt(sum over leaves of sum(leaf^2)), summed leaf by leaf
// in flatten order. A 0-d array of the leaves' promoted dtype.
Array global_norm(const Tree& tree);

}  // namespace pmap_engine::optim
