// Neural-network functions (jax.nn and optax's losses) as composites of the public ops, so that
// their gradients come from the primitives' VJP rules and their programs read like JAX's.
// Sources modelled (jax-ml/jax commit cec06d1, google-deepmind/optax commit 2edbcbe):
//   jax/_src/nn/functions.py        relu, gelu, sigmoid, silu, log_softmax, softmax (the
//                                   default jax_softmax_custom_jvp=False path), one_hot
//   jax/_src/lax/lax.py             logistic_p (sigmoid's primitive) and its JVP
//   jax/_src/ops/special.py         logsumexp (re-exported as jax.nn.logsumexp)
//   optax/losses/_classification.py softmax_cross_entropy_with_integer_labels,
//                                   softmax_cross_entropy
//   optax/losses/_smoothing.py      smooth_labels
//
// Three element-wise primitives that ops.h lacks are defined here: logistic (sigmoid is
// lax.logistic, one primitive in JAX too), erfc (for the exact gelu, which JAX writes with
// lax.erfc) and cos (for optax's cosine_decay_schedule in optim.cpp, through
// internal::cos_for_schedules).
//
// Dimension legend: B batch, K classes, ... any leading dimensions.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "ir/primitive.h"
#include "ops/kernel_util.h"
#include "ops/xla_math.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

constexpr double kPi = 3.14159265358979323846;

// --- unary floating-point primitives ------------------------------------------------------------

std::vector<ir::AbstractValue> floating_unary_type(const char* op,
                                                   const std::vector<ir::AbstractValue>& in) {
  if (in.size() != 1) throw EngineError(std::string(op) + ": expected one operand");
  if (!is_floating(in[0].dtype)) {
    throw EngineError(std::string(op) + ": expected a floating-point operand, got " +
                      type_to_string(in[0].dtype, in[0].shape) +
                      "; convert it first (astype(x, DType::f32))");
  }
  return in;
}

// Applies `fn` to every element in the operand's compute type (float for f32/bf16/f16,
// double for f64), so f32 results are what the float overloads of <cmath> give.
template <typename Fn>
std::vector<Buffer> map_floating(const Buffer& in, Fn fn) {
  Buffer out = Buffer::allocate_uninitialized(in.dtype, in.shape);  // written in full
  dispatch_float(in.dtype, [&](auto element) {
    using E = decltype(element);
    const auto* x = in.data<typename E::Storage>();
    auto* y = out.data<typename E::Storage>();
    for (size_t i = 0; i < in.num_elements(); ++i) y[i] = E::store(fn(E::load(x[i])));
  });
  return {out};
}

// A unary primitive's F32Block (ir/primitive.h) for loop fusion, from the function its kernel
// applies to an f32 buffer (`compute(in, out, n)`).
template <void (*compute)(const float*, float*, size_t)>
void unary_f32_block(const float* const* operands, const bool* scalar, float* out, size_t n) {
  if (!scalar[0]) {
    compute(operands[0], out, n);
    return;
  }
  compute(operands[0], out, 1);
  std::fill(out + 1, out + n, out[0]);
}

// std::erfc of each f32 value, as map_floating computes it for f32.
void erfc_f32(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = std::erfc(in[i]);
}

// Registers `primitive` with the F32Block that runs `compute` for loop fusion.
template <void (*compute)(const float*, float*, size_t)>
const ir::Primitive* register_with_f32_block(ir::Primitive primitive) {
  primitive.f32_block = &unary_f32_block<compute>;
  return ir::register_primitive(std::move(primitive));
}

// lax.logistic: 1 / (1 + exp(-x)), the expression XLA's LogisticExpander rewrites it to on CPU:
// in f32 (and bf16/f16, computed in f32 and rounded once) with XLA's own exp
// (xla_math::logistic_f32), in f64 with <cmath>. VJP: the transpose of lax.py's default JVP
// g * (ans * (1 - ans)).
const ir::Primitive* kLogistic = register_with_f32_block<xla_math::logistic_f32>({
    "logistic",
    [](const std::vector<ir::AbstractValue>& in, const ir::Params&) {
      return floating_unary_type("logistic", in);
    },
    [](const std::vector<const Buffer*>& in, const ir::Params&) {
      const Buffer& x = *in[0];
      return std::vector<Buffer>{dispatch_float(x.dtype, [&](auto element) {
        using E = decltype(element);
        if constexpr (std::is_same_v<typename E::Compute, float>) {
          return map_f32_block<E>(x, xla_math::logistic_f32);
        } else {
          Buffer out = Buffer::allocate_uninitialized(x.dtype, x.shape);  // written in full
          const double* v = x.data<double>();
          double* y = out.data<double>();
          for (size_t i = 0; i < x.num_elements(); ++i) y[i] = 1.0 / (1.0 + std::exp(-v[i]));
          return out;
        }
      })};
    },
    [](const ir::VjpArgs& args) {
      // ans, ct: [...]
      const Array& ans = args.outputs[0];
      const Array& ct = args.output_cotangents[0];
      return std::vector<Array>{ct * (ans * (1.0 - ans))};
    },
});

// lax.erfc. VJP (jax/_src/lax/special.py): d erfc(x)/dx = -2/sqrt(pi) exp(-x^2).
const ir::Primitive* kErfc = register_with_f32_block<erfc_f32>({
    "erfc",
    [](const std::vector<ir::AbstractValue>& in, const ir::Params&) {
      return floating_unary_type("erfc", in);
    },
    [](const std::vector<const Buffer*>& in, const ir::Params&) {
      return map_floating(*in[0], [](auto v) { return std::erfc(v); });
    },
    [](const ir::VjpArgs& args) {
      // x, ct: [...]
      const Array& x = args.inputs[0];
      const Array& ct = args.output_cotangents[0];
      return std::vector<Array>{ct * (exp(-square(x)) * (-2.0 / std::sqrt(kPi)))};
    },
});

// lax.cos, for optax's cosine_decay_schedule (see cos_for_schedules below). A schedule is a
// function of the i32 step count, which is never differentiated, so no VJP is given here; a
// public cos in ops.h would add -sin(x) * ct.
const ir::Primitive* kCos = ir::register_primitive({
    "cos",
    [](const std::vector<ir::AbstractValue>& in, const ir::Params&) {
      return floating_unary_type("cos", in);
    },
    [](const std::vector<const Buffer*>& in, const ir::Params&) {
      return map_floating(*in[0], [](auto v) { return std::cos(v); });
    },
    nullptr,
});

Array erfc_of(const Array& x) { return ir::bind1(*kErfc, {x}); }

// --- helpers ------------------------------------------------------------------------------------

// jnp's promote_args_inexact: integer and bool inputs become the default float (f32).
Array as_inexact(const Array& x) { return is_floating(x.dtype()) ? x : astype(x, DType::f32); }

// x with dimension `axis` (of size 1) removed: [..., 1, ...] -> [..., ...].
Array squeeze_axis(const Array& x, int64_t axis) {
  Shape shape = x.shape();
  shape.erase(shape.begin() + axis);
  return reshape(x, shape);
}

}  // namespace

// jax.nn.relu: jnp.maximum(x, 0) with a custom JVP select(x > 0, g, 0), so the gradient at 0
// is 0 (not maximum's 0.5). where(x <= 0, 0, x) has exactly that VJP through select_n, and
// keeps NaN (NaN <= 0 is false) as maximum does.
Array relu(const Array& x) {
  // x: [...]
  return where(less_equal(x, scalar_like(x, 0.0)), zeros_like(x), x);
}

// jax.nn.gelu.
//   approximate: x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
//   exact:       0.5 * x * erfc(-x * sqrt(1/2))  (= 0.5 x (1 + erf(x / sqrt 2)); JAX writes it
//                with erfc, which keeps precision for large negative x)
// The constants are rounded to x's dtype first, as np.sqrt(...).astype(x.dtype) does.
Array gelu(const Array& x_in, bool approximate) {
  // x: [...]
  const Array x = as_inexact(x_in);
  if (approximate) {
    const Array sqrt_2_over_pi = scalar_like(x, std::sqrt(2.0 / kPi));
    // x ** 3 is lax.integer_pow(x, 3) = x * (x * x).
    const Array x_cubed = x * square(x);
    const Array cdf = 0.5 * (1.0 + tanh(sqrt_2_over_pi * (x + 0.044715 * x_cubed)));
    return x * cdf;
  }
  const Array sqrt_half = scalar_like(x, std::sqrt(0.5));
  return 0.5 * x * erfc_of(-x * sqrt_half);
}

// jax.nn.sigmoid: lax.logistic(x) itself, so integer inputs are refused, as lax refuses them.
Array sigmoid(const Array& x) {
  // x: [...]
  return ir::bind1(*kLogistic, {x});
}

// jax.nn.silu (alias swish): x * sigmoid(x); its gradient comes from mul's and logistic's.
Array silu(const Array& x) {
  // x: [...]
  return x * sigmoid(x);
}

// jax.nn.logsumexp over one axis: the max is taken out (and replaced by 0 where it is not
// finite, so that all -inf rows give -inf rather than NaN), under stop_gradient: the gradient
// is the softmax through the exp/sum/log alone.
Array logsumexp(const Array& x_in, int64_t axis, bool keepdims) {
  // x: [..., K, ...] -> [..., ...] (or [..., 1, ...] with keepdims)
  const Array x = as_inexact(x_in);
  const int64_t axis_index = normalize_axis("logsumexp", axis, x.ndim());
  Array amax = max(x, {axis_index}, /*keepdims=*/true);
  const Array is_finite =
      less(abs(amax), scalar_like(amax, std::numeric_limits<double>::infinity()));
  amax = stop_gradient(where(is_finite, amax, zeros_like(amax)));
  const Array exp_shifted = exp(x - amax);
  const Array sum_exp = sum(exp_shifted, {axis_index}, /*keepdims=*/true);
  const Array out = log(abs(sum_exp)) + amax;
  return keepdims ? out : squeeze_axis(out, axis_index);
}

// jax.nn.log_softmax: x - stop_gradient(max) - log(sum(exp(x - stop_gradient(max)))).
Array log_softmax(const Array& x_in, int64_t axis) {
  // x: [..., K, ...] -> same shape
  const Array x = as_inexact(x_in);
  const int64_t axis_index = normalize_axis("log_softmax", axis, x.ndim());
  const Array shifted = x - stop_gradient(max(x, {axis_index}, /*keepdims=*/true));
  return shifted - log(sum(exp(shifted), {axis_index}, /*keepdims=*/true));
}

// jax.nn.softmax with jax_softmax_custom_jvp=False (JAX's default, jax/_src/config.py):
// exp(x - stop_gradient(max)) / sum(...), differentiated through its primitives.
Array softmax(const Array& x_in, int64_t axis) {
  // x: [..., K, ...] -> same shape
  const Array x = as_inexact(x_in);
  const int64_t axis_index = normalize_axis("softmax", axis, x.ndim());
  const Array unnormalized = exp(x - stop_gradient(max(x, {axis_index}, /*keepdims=*/true)));
  return unnormalized / sum(unnormalized, {axis_index}, /*keepdims=*/true);
}

// jax.nn.one_hot(labels, K): labels[..., None] == iota over a trailing class axis. Labels
// outside [0, K) (negative ones included) give an all-zero row, as in JAX.
Array one_hot(const Array& labels, int64_t num_classes, DType dtype) {
  // labels: [...] -> [..., K]
  if (num_classes < 0) {
    throw EngineError("one_hot: num_classes must be non-negative, got " +
                      std::to_string(num_classes));
  }
  if (labels.dtype() == DType::bool_) {
    throw EngineError("one_hot: labels must be integers, got " +
                      type_to_string(labels.dtype(), labels.shape()));
  }
  Shape class_shape(static_cast<size_t>(labels.ndim()) + 1, 1);
  class_shape.back() = num_classes;
  const Array classes = iota(labels.dtype(), class_shape, labels.ndim());  // [1, ..., 1, K]
  return astype(equal(expand_dims(labels, labels.ndim()), classes), dtype);
}

// optax.softmax_cross_entropy_with_integer_labels: logsumexp(logits) - logits[label], without
// forming the whole log_softmax.
Array softmax_cross_entropy_with_integer_labels(const Array& logits, const Array& labels) {
  // logits: [..., K], labels: [...] -> [...]
  const char* op = "softmax_cross_entropy_with_integer_labels";
  if (!is_floating(logits.dtype())) {
    throw EngineError(std::string(op) + ": logits must be floating point, got " +
                      type_to_string(logits.dtype(), logits.shape()));
  }
  if (!is_integer(labels.dtype())) {
    throw EngineError(std::string(op) + ": labels must be integer class indices, got " +
                      type_to_string(labels.dtype(), labels.shape()) +
                      " (for one-hot or soft targets use a softmax_cross_entropy on "
                      "log_softmax)");
  }
  if (logits.ndim() < 1 ||
      Shape(logits.shape().begin(), logits.shape().end() - 1) != labels.shape()) {
    throw EngineError(std::string(op) + ": labels " +
                      type_to_string(labels.dtype(), labels.shape()) +
                      " must have the logits' shape without the class axis; logits are " +
                      type_to_string(logits.dtype(), logits.shape()));
  }
  const int64_t class_axis = logits.ndim() - 1;
  const Array label_logits = squeeze_axis(
      take_along_axis(logits, expand_dims(labels, class_axis), class_axis), class_axis);
  return logsumexp(logits, class_axis) - label_logits;
}

// optax.softmax_cross_entropy: -sum(targets * log_softmax(logits), axis=-1), for targets that are
// a distribution over the classes (one-hot, or smoothed by smooth_labels).
Array softmax_cross_entropy(const Array& logits, const Array& targets) {
  // logits: [..., K], targets: [..., K] -> [...]
  const char* op = "softmax_cross_entropy";
  if (!is_floating(logits.dtype()) || !is_floating(targets.dtype())) {
    throw EngineError(std::string(op) + ": logits and targets must be floating point, got " +
                      type_to_string(logits.dtype(), logits.shape()) + " and " +
                      type_to_string(targets.dtype(), targets.shape()) +
                      " (for integer labels use softmax_cross_entropy_with_integer_labels)");
  }
  if (logits.ndim() < 1 || logits.shape() != targets.shape()) {
    throw EngineError(std::string(op) + ": targets " +
                      type_to_string(targets.dtype(), targets.shape()) +
                      " must have the logits' shape " +
                      type_to_string(logits.dtype(), logits.shape()));
  }
  const int64_t class_axis = logits.ndim() - 1;
  return -sum(targets * log_softmax(logits, class_axis), {class_axis});
}

// optax.smooth_labels (without `where`): each row keeps 1 - alpha of its one-hot mass and
// spreads alpha evenly over all K classes, the true one included: on-value 1 - alpha + alpha/K,
// off-value alpha/K. torch's cross_entropy(label_smoothing=alpha) mixes in the same uniform.
Array smooth_labels(const Array& labels, double alpha) {
  // labels: [..., K] -> [..., K]
  if (!is_floating(labels.dtype()) || labels.ndim() < 1) {
    throw EngineError("smooth_labels: labels must be one-hot floating-point rows [..., K], got " +
                      type_to_string(labels.dtype(), labels.shape()));
  }
  const auto num_classes = static_cast<double>(labels.shape().back());
  return labels * (1.0 - alpha) + alpha / num_classes;
}

namespace internal {
// lax.cos for optim.cpp's schedules, which declares it: ops.h has no cos yet. A direct call
// (rather than ir::find_primitive("cos")) also makes the static library link this file, and so
// register the primitive, in every program that uses a schedule.
Array cos_for_schedules(const Array& x) { return ir::bind1(*kCos, {x}); }
}  // namespace internal

// mean((predictions - targets)^2) over every element; the operands broadcast as in `sub`.
Array mse(const Array& predictions, const Array& targets) {
  // predictions, targets: [...] -> []
  return mean(square(predictions - targets));
}

}  // namespace pmap_engine
