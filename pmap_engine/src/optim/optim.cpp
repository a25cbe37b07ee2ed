// optax's gradient transformations, written with the public ops (see optim.h for the sources
// and the state layout). Each transformation below cites the optax function it models; the
// arithmetic keeps optax's operand order and its Python-scalar rounding (a Python float meets
// an array in the array's dtype: weak typing), so f32 trajectories round as optax's do.
//
// Vocabulary:
//   updates  the tree flowing through a chain: the gradients at its start, the parameter
//            deltas at its end (apply_updates adds them).
//   count    an i32[] step counter in a state; incremented with saturation (safe_increment).
//   moment   Adam's exponential moving averages: mu (of g) and nu (of g^2); RMSprop keeps nu
//            alone, Adagrad a plain sum of g^2 (sum_of_squares).
//   eps placement  where the denominator's epsilon goes: inside the root, rsqrt(v + eps)
//            (optax's RMSprop and Adagrad), or after it, 1 / (sqrt(v) + eps) (torch.optim's).
#include "pmap_engine/optim.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "pmap_engine/ops.h"

namespace pmap_engine::internal {
// lax.cos, defined with its primitive in ops/nn.cpp (ops.h has no cos).
Array cos_for_schedules(const Array& x);
}  // namespace pmap_engine::internal

namespace pmap_engine::optim {
namespace {

constexpr double kPi = 3.14159265358979323846;

Tree empty_state() { return Tree::tuple({}); }

Tree zeros_like_tree(const Tree& tree) { return tree_map(zeros_like, tree); }

Array cast_if_needed(const Array& x, DType dtype) {
  return x.dtype() == dtype ? x : astype(x, dtype);
}

// optax/_src/numerics.py safe_increment: count + 1, saturating at the dtype's maximum.
Array safe_increment(const Array& count) {
  // count: i32[]
  const Array max_value = full({}, std::numeric_limits<int32_t>::max(), DType::i32);
  return where(less(count, max_value), count + 1.0, max_value);
}

// The i32[] count of a (count, ...) state, checked so that a wrong state names the problem.
const Array& count_of(const char* transformation, const Tree& state) {
  if (state.kind() != Tree::Kind::kTuple || state.children().empty() || !state[0].is_leaf() ||
      state[0].leaf().dtype() != DType::i32 || !state[0].leaf().shape().empty()) {
    throw EngineError(std::string(transformation) +
                      ": expected a state (count, ...) with an i32[] count, got " +
                      state.structure() + "; pass the state that init() returned");
  }
  return state[0].leaf();
}

// The dtype the weak-typed scalar arithmetic of optax runs in: f64 for f64 operands (as under
// jax_enable_x64), otherwise f32 (JAX's default float).
DType scalar_compute_dtype(DType leaf_dtype) {
  return leaf_dtype == DType::f64 ? DType::f64 : DType::f32;
}

// decay ** count as jnp.power(decay, count) computes it for an i32 count: pow(dtype(decay),
// dtype(count)). The power is taken as exp(count * log(base)) in f64 (with base already rounded
// to `dtype`), then rounded to `dtype`: within an ulp of a correctly rounded pow for f32, and
// within count * |log base| * 2^-53 (relative) for f64.
Array power_of_count(double decay, const Array& count, DType dtype) {
  // count: i32[] -> dtype[]
  const double base = dtype == DType::f32 ? static_cast<double>(static_cast<float>(decay)) : decay;
  return cast_if_needed(exp(astype(count, DType::f64) * std::log(base)), dtype);
}

// optax.tree.bias_correction: t / (1 - decay^count), the correction computed in the scalar
// dtype and cast to each leaf's dtype before dividing.
Tree bias_correction(const Tree& moment, double decay, const Array& count) {
  std::map<DType, Array> correction_by_dtype;  // one correction per compute dtype
  return tree_map(
      [&](const Array& t) {
        const DType compute = scalar_compute_dtype(t.dtype());
        auto found = correction_by_dtype.find(compute);
        if (found == correction_by_dtype.end()) {
          found = correction_by_dtype.emplace(compute, 1.0 - power_of_count(decay, count, compute))
                      .first;
        }
        return t / cast_if_needed(found->second, t.dtype());
      },
      moment);
}

// optax.tree.full_like(params, value): each leaf's shape and dtype, filled with value.
Tree full_like_tree(const Tree& tree, double value) {
  return tree_map([value](const Array& x) { return full(x.shape(), value, x.dtype()); }, tree);
}

// The one-entry state (accumulator,) of scale_by_rms and scale_by_rss, checked.
const Tree& accumulator_of(const char* transformation, const Tree& state) {
  if (state.kind() != Tree::Kind::kTuple || state.children().size() != 1) {
    throw EngineError(std::string(transformation) + ": expected a state (accumulator,), got " +
                      state.structure() + "; pass the state that init() returned");
  }
  return state[0];
}

// 1 / sqrt(v + eps), or 1 / (sqrt(v) + eps): the two placements of eps (vocabulary above).
Array inverse_root(const Array& v, double eps, bool eps_in_sqrt) {
  return eps_in_sqrt ? rsqrt(v + eps) : 1.0 / (sqrt(v) + eps);
}

void check_params_given(const char* transformation, const Tree& params) {
  if (params.kind() == Tree::Kind::kNone) {
    throw EngineError(std::string(transformation) +
                      ": this transformation needs the current parameters, but update() was "
                      "called without them; pass params as update's third argument");
  }
}

}  // namespace

// --- schedules (optax/schedules/_schedule.py) ---------------------------------------------------

Schedule constant_schedule(double value) {
  return [value](const Array&) { return full({}, value, DType::f64); };
}

Schedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha, DType dtype) {
  if (decay_steps <= 0) {
    throw EngineError("cosine_decay_schedule requires positive decay_steps, got decay_steps=" +
                      std::to_string(decay_steps));
  }
  if (!is_floating(dtype)) {
    throw EngineError(std::string("cosine_decay_schedule: dtype must be floating, got ") +
                      dtype_name(dtype));
  }
  const auto steps = static_cast<double>(decay_steps);
  return [=](const Array& count) {
    // count: i32[] -> dtype[]
    const Array clamped = minimum(astype(count, dtype), full({}, steps, dtype));
    const Array cosine_decay = 0.5 * (1.0 + internal::cos_for_schedules(kPi * clamped / steps));
    const Array decayed = (1.0 - alpha) * cosine_decay + alpha;  // cosine_decay ** 1.0
    return init_value * decayed;
  };
}

// --- building blocks ----------------------------------------------------------------------------

GradientTransformation identity() {
  return {[](const Tree&) { return empty_state(); },
          [](const Tree& updates, const Tree& state, const Tree&) {
            return std::make_pair(updates, state);
          }};
}

// optax/_src/transform.py scale: step_size * g (the Python float rounded to g's dtype).
GradientTransformation scale(double step_size) {
  return {[](const Tree&) { return empty_state(); },
          [step_size](const Tree& updates, const Tree& state, const Tree&) {
            return std::make_pair(
                tree_map([step_size](const Array& g) { return step_size * g; }, updates), state);
          }};
}

// optax/_src/transform.py scale_by_schedule: the step size is computed once per update and
// converted to each leaf's dtype (jnp.array(step_size, dtype=g.dtype) * g).
GradientTransformation scale_by_schedule(Schedule step_size_fn) {
  return {[](const Tree&) { return Tree::tuple({Tree(zeros({}, DType::i32))}); },
          [step_size_fn](const Tree& updates, const Tree& state, const Tree&) {
            const Array& count = count_of("scale_by_schedule", state);
            const Array step_size = step_size_fn(count);
            Tree scaled = tree_map(
                [&](const Array& g) { return cast_if_needed(step_size, g.dtype()) * g; }, updates);
            return std::make_pair(scaled, Tree::tuple({Tree(safe_increment(count))}));
          }};
}

GradientTransformation scale_by_learning_rate(ScalarOrSchedule learning_rate, bool flip_sign) {
  const double sign = flip_sign ? -1.0 : 1.0;
  if (!learning_rate.is_schedule()) return scale(sign * learning_rate.value());
  Schedule schedule = learning_rate.schedule();
  if (!flip_sign) return scale_by_schedule(schedule);
  return scale_by_schedule([schedule](const Array& count) { return -schedule(count); });
}

// optax/transforms/_accumulation.py trace: f(g, t) = g + decay * t.
GradientTransformation trace(double decay, bool nesterov) {
  return {[](const Tree& params) { return Tree::tuple({zeros_like_tree(params)}); },
          [decay, nesterov](const Tree& updates, const Tree& state, const Tree&) {
            if (state.kind() != Tree::Kind::kTuple || state.children().size() != 1) {
              throw EngineError("trace: expected a state (trace,), got " + state.structure());
            }
            auto accumulate = [decay](const Array& g, const Array& t) { return g + decay * t; };
            Tree new_trace = tree_map(accumulate, updates, state[0]);
            Tree out = nesterov ? tree_map(accumulate, updates, new_trace) : new_trace;
            return std::make_pair(out, Tree::tuple({new_trace}));
          }};
}

// optax/_src/transform.py scale_by_adam (nesterov=False, mu_dtype=None).
GradientTransformation scale_by_adam(double b1, double b2, double eps, double eps_root) {
  return {[](const Tree& params) {
            return Tree::tuple(
                {Tree(zeros({}, DType::i32)), zeros_like_tree(params), zeros_like_tree(params)});
          },
          [=](const Tree& updates, const Tree& state, const Tree&) {
            const Array& count = count_of("scale_by_adam", state);
            if (state.children().size() != 3) {
              throw EngineError("scale_by_adam: expected a state (count, mu, nu), got " +
                                state.structure());
            }
            // update_moment (order 1) and update_moment_per_elem_norm (order 2, g ** 2 = g * g):
            // (1 - decay) * g^order + decay * moment.
            Tree mu =
                tree_map([b1](const Array& g, const Array& m) { return (1.0 - b1) * g + b1 * m; },
                         updates, state[1]);
            Tree nu = tree_map(
                [b2](const Array& g, const Array& v) { return (1.0 - b2) * square(g) + b2 * v; },
                updates, state[2]);
            const Array count_inc = safe_increment(count);
            Tree mu_hat = bias_correction(mu, b1, count_inc);
            Tree nu_hat = bias_correction(nu, b2, count_inc);
            Tree out = tree_map(
                [&](const Array& m, const Array& v) {
                  const Array root = eps_root == 0.0 ? sqrt(v) : sqrt(v + eps_root);
                  return m / (root + eps);
                },
                mu_hat, nu_hat);
            // nu is cast like the old nu (optax.tree.cast_like); mu keeps its dtype.
            nu = tree_map(
                [](const Array& v, const Array& old) { return cast_if_needed(v, old.dtype()); }, nu,
                state[2]);
            return std::make_pair(out, Tree::tuple({Tree(count_inc), mu, nu}));
          }};
}

namespace {

// The skeleton scale_by_rms and scale_by_rss share: a state (accumulator,) started at
// `initial` in every element (optax.tree.full_like), updated by accumulate(g, old), and each
// update g scaled by scaling(new accumulator) * g, the scaling computed on its own as optax does.
GradientTransformation scale_by_accumulated_squares(
    const char* name, double initial,
    std::function<Array(const Array& g, const Array& old)> accumulate,
    std::function<Array(const Array& accumulator)> scaling) {
  return {[initial](const Tree& params) {
            return Tree::tuple({full_like_tree(params, initial)});
          },
          [=](const Tree& updates, const Tree& state, const Tree&) {
            Tree accumulator = tree_map(accumulate, updates, accumulator_of(name, state));
            Tree out = tree_map(
                [&](const Array& g, const Array& v) { return scaling(v) * g; }, updates,
                accumulator);
            return std::make_pair(out, Tree::tuple({accumulator}));
          }};
}

}  // namespace

// optax/_src/transform.py scale_by_rms (bias_correction=False): nu through
// update_moment_per_elem_norm (order 2), then rsqrt(nu + eps) * g, or
// 1 / (sqrt(nu) + eps) * g when eps_in_sqrt=False.
GradientTransformation scale_by_rms(double decay, double eps, double initial_scale,
                                    bool eps_in_sqrt) {
  return scale_by_accumulated_squares(
      "scale_by_rms", initial_scale,
      [decay](const Array& g, const Array& nu) { return (1.0 - decay) * square(g) + decay * nu; },
      [=](const Array& nu) { return inverse_root(nu, eps, eps_in_sqrt); });
}

// optax/_src/transform.py scale_by_rss: sum_of_squares = abs_sq(g) + s, then
// where(s > 0, rsqrt(s + eps), 0) * g. optax has no eps_in_sqrt here; false is this engine's
// way to train torch/optim/adagrad.py _single_tensor_adagrad's g / (sqrt(s) + eps) with
// optax's guard for s = 0 kept.
GradientTransformation scale_by_rss(double initial_accumulator_value, double eps,
                                    bool eps_in_sqrt) {
  return scale_by_accumulated_squares(
      "scale_by_rss", initial_accumulator_value,
      [](const Array& g, const Array& s) { return square(g) + s; },
      [=](const Array& s) {
        return where(greater(s, scalar_like(s, 0.0)), inverse_root(s, eps, eps_in_sqrt),
                     zeros_like(s));
      });
}

// optax/transforms/_adding.py add_decayed_weights (constant weight_decay, no mask).
GradientTransformation add_decayed_weights(double weight_decay) {
  return {[](const Tree&) { return empty_state(); },
          [weight_decay](const Tree& updates, const Tree& state, const Tree& params) {
            check_params_given("add_decayed_weights", params);
            if (weight_decay == 0.0) return std::make_pair(updates, state);
            Tree out = tree_map(
                [weight_decay](const Array& g, const Array& p) { return g + weight_decay * p; },
                updates, params);
            return std::make_pair(out, state);
          }};
}

// optax/transforms/_clipping.py clip_by_global_norm: clip when g_norm >= max_norm (so a norm
// exactly at the limit is "clipped" to itself), leave alone below.
GradientTransformation clip_by_global_norm(double max_norm) {
  return {[](const Tree&) { return empty_state(); },
          [max_norm](const Tree& updates, const Tree& state, const Tree&) {
            const Array g_norm = global_norm(updates);
            const Array trigger = less(g_norm, scalar_like(g_norm, max_norm));
            Tree out = tree_map(
                [&](const Array& t) {
                  return where(trigger, t, (t / cast_if_needed(g_norm, t.dtype())) * max_norm);
                },
                updates);
            return std::make_pair(out, state);
          }};
}

// optax/transforms/_combining.py chain.
GradientTransformation chain(std::vector<GradientTransformation> transformations) {
  auto init = [transformations](const Tree& params) {
    std::vector<Tree> states;
    for (const auto& transformation : transformations)
      states.push_back(transformation.init(params));
    return Tree::tuple(states);
  };
  auto update = [transformations](const Tree& grads, const Tree& state, const Tree& params) {
    if (state.kind() != Tree::Kind::kTuple || state.children().size() != transformations.size()) {
      throw EngineError("chain: the state " + state.structure() +
                        " does not have one entry per "
                        "transformation (" +
                        std::to_string(transformations.size()) +
                        "); make sure you called init first");
    }
    Tree updates = grads;
    std::vector<Tree> new_states;
    for (size_t i = 0; i < transformations.size(); ++i) {
      auto [next_updates, new_state] = transformations[i].update(updates, state[i], params);
      updates = next_updates;
      new_states.push_back(new_state);
    }
    return std::make_pair(updates, Tree::tuple(new_states));
  };
  return {init, update};
}

// --- optimizers (optax/_src/alias.py) -----------------------------------------------------------

GradientTransformation sgd(ScalarOrSchedule learning_rate, std::optional<double> momentum,
                           bool nesterov) {
  return chain({momentum ? trace(*momentum, nesterov) : identity(),
                scale_by_learning_rate(std::move(learning_rate))});
}

GradientTransformation adam(ScalarOrSchedule learning_rate, double b1, double b2, double eps,
                            double eps_root) {
  return chain(
      {scale_by_adam(b1, b2, eps, eps_root), scale_by_learning_rate(std::move(learning_rate))});
}

GradientTransformation adamw(ScalarOrSchedule learning_rate, double b1, double b2, double eps,
                             double eps_root, double weight_decay) {
  return chain({scale_by_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay),
                scale_by_learning_rate(std::move(learning_rate))});
}

GradientTransformation rmsprop(ScalarOrSchedule learning_rate, double decay, double eps,
                               double initial_scale, bool eps_in_sqrt) {
  return chain({scale_by_rms(decay, eps, initial_scale, eps_in_sqrt),
                scale_by_learning_rate(std::move(learning_rate))});
}

GradientTransformation adagrad(ScalarOrSchedule learning_rate, double initial_accumulator_value,
                               double eps, bool eps_in_sqrt) {
  return chain({scale_by_rss(initial_accumulator_value, eps, eps_in_sqrt),
                scale_by_learning_rate(std::move(learning_rate))});
}

// --- applying and measuring ---------------------------------------------------------------------

// optax/_src/update.py apply_updates: (p + u).astype(p.dtype).
Tree apply_updates(const Tree& params, const Tree& updates) {
  if (params.structure() != updates.structure()) {
    throw EngineError("apply_updates: params " + params.structure() + " and updates " +
                      updates.structure() + " have different structures");
  }
  return tree_map([](const Array& p, const Array& u) { return cast_if_needed(p + u, p.dtype()); },
                  params, updates);
}

// optax/tree_utils/_tree_math.py norm (ord 2): sqrt(reduce(add, [sum(square(leaf))], 0)).
Array global_norm(const Tree& tree) {
  std::vector<Array> leaves = tree.leaves();
  if (leaves.empty()) return zeros({}, DType::f32);
  Array total = sum(square(leaves[0]));
  for (size_t i = 1; i < leaves.size(); ++i) total = total + sum(square(leaves[i]));
  return sqrt(total);
}

}  // namespace pmap_engine::optim
