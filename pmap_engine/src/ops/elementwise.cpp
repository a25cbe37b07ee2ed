// Element-wise primitives (jax/_src/lax/lax.py) and the jax.numpy functions over them.
//
// Binary primitives take operands of one dtype whose shapes broadcast the way lax's do
// (broadcasting_shape_rule): 0-d operands go with anything, other operands have equal rank and
// each dimension equal or 1. The public functions promote dtypes and ranks first
// (ops/broadcasting.h), so `x[B, D] + b[D]` records a broadcast_in_dim of b to [1, D] and an
// add; the add's VJP sums the cotangent back to each operand's shape (unbroadcast).
//
// Dimension legend: S an operand's shape, S' the broadcast (output) shape.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "ir/primitive.h"
#include "ops/broadcasting.h"
#include "ops/cpu_isa.h"
#include "ops/kernel_util.h"
#include "ops/xla_math.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

using ir::AbstractValue;
using ir::Params;
using ir::VjpArgs;

// The dtypes a primitive accepts, named as in lax.py.
enum class Accepts {
  kFloat,       // _float
  kSignedNum,   // _signedint | _float (abs)
  kNum,         // _num: floats and integers
  kAny,         // every dtype, bool included
};

bool accepts(Accepts set, DType dtype) {
  switch (set) {
    case Accepts::kFloat: return is_floating(dtype);
    case Accepts::kSignedNum: return is_floating(dtype) || dtype == DType::i32;
    case Accepts::kNum: return dtype != DType::bool_;
    case Accepts::kAny: return true;
  }
  return false;
}

const char* accepted_names(Accepts set) {
  switch (set) {
    case Accepts::kFloat: return "floating-point (f32, f64, bf16, f16)";
    case Accepts::kSignedNum: return "floating-point or i32";
    case Accepts::kNum: return "numeric (not bool)";
    case Accepts::kAny: return "any";
  }
  return "?";
}

void check_accepts(const std::string& op, Accepts set, const std::vector<AbstractValue>& in) {
  for (const AbstractValue& operand : in) {
    if (accepts(set, operand.dtype)) continue;
    std::string types;
    for (size_t i = 0; i < in.size(); ++i) types += (i ? " and " : "") + type_of(in[i]);
    throw EngineError(op + ": does not accept " + dtype_name(operand.dtype) + " operands (got " +
                      types + "); it takes " + accepted_names(set) +
                      " dtypes. Convert with astype first.");
  }
}

// The output shape of two operands that passed binary_output_shape.
Shape broadcast_shape_of(const Shape& a, const Shape& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  Shape out(a.size());
  for (size_t d = 0; d < out.size(); ++d) out[d] = a[d] == 1 ? b[d] : a[d];
  return out;
}

// lax's broadcasting_shape_rule for two operands.
Shape binary_output_shape(const std::string& op, const AbstractValue& a, const AbstractValue& b) {
  auto fail = [&](const std::string& why) {
    throw EngineError(op + ": incompatible shapes " + type_of(a) + " and " + type_of(b) + " (" +
                      why + ")");
  };
  if (!a.shape.empty() && !b.shape.empty()) {
    if (a.shape.size() != b.shape.size()) fail("a primitive needs equal ranks or a 0-d operand");
    for (size_t d = 0; d < a.shape.size(); ++d) {
      int64_t x = a.shape[d], y = b.shape[d];
      if (x != y && x != 1 && y != 1) fail("each dimension must be equal or 1");
    }
  }
  return broadcast_shape_of(a.shape, b.shape);
}

AbstractValue binary_abstract_eval(const std::string& op, Accepts set, bool bool_result,
                                   const std::vector<AbstractValue>& in) {
  if (in.size() != 2) throw EngineError(op + ": expected 2 operands");
  check_accepts(op, set, in);
  Shape shape = binary_output_shape(op, in[0], in[1]);
  if (in[0].dtype != in[1].dtype) {
    throw EngineError(op + ": operands must have the same dtype, got " + type_of(in[0]) +
                      " and " + type_of(in[1]) +
                      " (the jnp-style functions promote; a primitive does not)");
  }
  return {bool_result ? DType::bool_ : in[0].dtype, shape};
}

// --- kernels ------------------------------------------------------------------------------

// out[i] = fn(a[i'], b[i'']) over the broadcast shape. E: the operands' element type;
// Out: the result's (E itself, or BoolElement for comparisons).
template <typename E, typename Out, typename Fn>
Buffer binary_map(const Buffer& a, const Buffer& b, Fn fn) {
  Shape shape = broadcast_shape_of(a.shape, b.shape);
  // Every element is written (after its operands are read): no zero-fill needed, and the
  // storage may be a dying operand's (in-place).
  Buffer output = Buffer::allocate_uninitialized(Out::kDType, shape);
  const auto* x = a.data<typename E::Storage>();
  const auto* y = b.data<typename E::Storage>();
  auto* out = output.data<typename Out::Storage>();
  // Fast paths for the common cases: equal shapes, and one operand a single element
  // (`x * 0.5`); the general case walks strides.
  const size_t num_elements = output.num_elements();
  if (a.shape == shape && b.shape == shape) {
    for (size_t i = 0; i < num_elements; ++i) out[i] = Out::store(fn(E::load(x[i]), E::load(y[i])));
    return output;
  }
  if (a.shape == shape && b.num_elements() == 1) {
    const auto y0 = E::load(y[0]);
    for (size_t i = 0; i < num_elements; ++i) out[i] = Out::store(fn(E::load(x[i]), y0));
    return output;
  }
  if (b.shape == shape && a.num_elements() == 1) {
    const auto x0 = E::load(x[0]);
    for (size_t i = 0; i < num_elements; ++i) out[i] = Out::store(fn(x0, E::load(y[i])));
    return output;
  }
  std::array<std::vector<int64_t>, 2> strides = {trailing_broadcast_strides(a.shape, shape),
                                                 trailing_broadcast_strides(b.shape, shape)};
  for_each_strided(shape, strides, [&](size_t flat, const std::array<int64_t, 2>& offsets) {
    out[flat] = Out::store(fn(E::load(x[offsets[0]]), E::load(y[offsets[1]])));
  });
  return output;
}

// out[i] = fn(in[i]); where the primitive has an f32 block function (XLA's own approximation,
// ops/xla_math.h), every dtype computed in f32 (f32, bf16, f16) goes through it instead, as XLA
// upcasts bf16/f16 to f32 for these functions.
template <typename E, typename Fn>
Buffer unary_map(const Buffer& x, Fn fn, xla_math::F32BlockFn f32_block) {
  if constexpr (std::is_same_v<typename E::Compute, float>) {
    if (f32_block != nullptr) return map_f32_block<E>(x, f32_block);
  }
  Buffer output = Buffer::allocate_uninitialized(x.dtype, x.shape);  // written in full
  const auto* in = x.data<typename E::Storage>();
  auto* out = output.data<typename E::Storage>();
  size_t num_elements = x.num_elements();
  for (size_t i = 0; i < num_elements; ++i) out[i] = E::store(fn(E::load(in[i])));
  return output;
}

// Signed integer arithmetic wraps around in two's complement, as XLA's does, instead of being
// undefined behaviour in C++: compute in uint32_t.
template <typename T, typename Fn>
T wrapping(T x, T y, Fn fn) {
  if constexpr (std::is_same_v<T, int32_t>) {
    return static_cast<int32_t>(fn(static_cast<uint32_t>(x), static_cast<uint32_t>(y)));
  } else {
    return fn(x, y);
  }
}

template <typename T>
T divide(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    return x / y;
  } else if constexpr (std::is_signed_v<T>) {
    // XLA on CPU: x / 0 is -1, and INT_MIN / -1 wraps to INT_MIN; otherwise rounds toward 0.
    if (y == 0) return T(-1);
    if (x == std::numeric_limits<T>::min() && y == T(-1)) return x;
    return x / y;
  } else {
    return y == 0 ? std::numeric_limits<T>::max() : x / y;
  }
}

// XLA's max and min propagate NaN (lax.max's documented semantics).
template <typename T>
T maximum_value(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  }
  return x > y ? x : y;
}

template <typename T>
T minimum_value(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  }
  return x < y ? x : y;
}

template <typename T>
T negate(T x) {
  if constexpr (std::is_same_v<T, int32_t>) {
    return static_cast<int32_t>(0u - static_cast<uint32_t>(x));
  } else {
    return -x;
  }
}

// -1, 0 or 1; a float zero keeps its sign and NaN stays NaN (returning x itself does both).
template <typename T>
T sign_value(T x) {
  if constexpr (std::is_unsigned_v<T>) {
    return x > 0 ? T(1) : T(0);
  } else {
    return x > 0 ? T(1) : (x < 0 ? T(-1) : x);
  }
}

template <typename T>
T absolute(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::abs(x);
  } else if constexpr (std::is_unsigned_v<T>) {
    return x;
  } else {
    return x < 0 ? negate(x) : x;  // |INT_MIN| wraps to INT_MIN, as in XLA
  }
}

// The F32Block of a primitive whose per-element function is `Fn` (ir/primitive.h): the same
// computation as its kernel's f32 loop, over a block, for loop fusion. The closure is kept in a
// static (a C++17 lambda type cannot be default-constructed); the element-wise lambdas capture
// nothing, so the call inlines and the loops vectorise. Each loop is compiled twice, for the
// baseline ISA and for AVX2 (twice the lanes; no FMA: each operation still rounds on its own, so
// both give the same bits), and registration picks one by what the CPU supports (ops/cpu_isa.h).
template <typename Fn>
struct F32Blocks {
  static inline std::optional<Fn> fn;
  // A unary primitive's own f32 block function (XLA's approximation), which its kernel runs
  // instead of `fn` for f32: the fused loop must run it too.
  static inline xla_math::F32BlockFn f32_block = nullptr;

  __attribute__((always_inline)) static inline void binary_loops(const float* const* in,
                                                                 const bool* scalar, float* out,
                                                                 size_t n) {
    const Fn& f = *fn;
    const float* x = in[0];
    const float* y = in[1];
    if (!scalar[0] && !scalar[1]) {
      for (size_t i = 0; i < n; ++i) out[i] = f(x[i], y[i]);
    } else if (!scalar[0]) {
      const float y0 = y[0];
      for (size_t i = 0; i < n; ++i) out[i] = f(x[i], y0);
    } else if (!scalar[1]) {
      const float x0 = x[0];
      for (size_t i = 0; i < n; ++i) out[i] = f(x0, y[i]);
    } else {
      const float value = f(x[0], y[0]);
      for (size_t i = 0; i < n; ++i) out[i] = value;
    }
  }
  static void binary(const float* const* in, const bool* scalar, float* out, size_t n) {
    binary_loops(in, scalar, out, n);
  }
  __attribute__((target("avx2"))) static void binary_avx2(const float* const* in,
                                                          const bool* scalar, float* out,
                                                          size_t n) {
    binary_loops(in, scalar, out, n);
  }

  __attribute__((always_inline)) static inline void unary_loops(const float* const* in,
                                                                const bool* scalar, float* out,
                                                                size_t n) {
    const Fn& f = *fn;
    const float* x = in[0];
    if (scalar[0]) {
      float value = 0;
      if (f32_block != nullptr) {
        f32_block(x, &value, 1);
      } else {
        value = f(x[0]);
      }
      for (size_t i = 0; i < n; ++i) out[i] = value;
      return;
    }
    if (f32_block != nullptr) {
      f32_block(x, out, n);
      return;
    }
    for (size_t i = 0; i < n; ++i) out[i] = f(x[i]);
  }
  static void unary(const float* const* in, const bool* scalar, float* out, size_t n) {
    unary_loops(in, scalar, out, n);
  }
  __attribute__((target("avx2"))) static void unary_avx2(const float* const* in,
                                                         const bool* scalar, float* out,
                                                         size_t n) {
    unary_loops(in, scalar, out, n);
  }
};

bool cpu_has_avx2() { return ops::cpu_isa().avx2; }

// --- registration helpers -----------------------------------------------------------------

using Vjp = std::function<std::vector<Array>(const VjpArgs&)>;

// A differentiable rule only sees float cotangents; integer results have none (float0 in JAX).
Vjp float_only(Vjp rule) {
  return [rule](const VjpArgs& args) {
    const Array& ct = args.output_cotangents[0];
    if (!ct.valid() || !is_floating(args.outputs[0].dtype())) {
      return std::vector<Array>(args.inputs.size());
    }
    return rule(args);
  };
}

// Runs `run(ElementType{})` for the dtypes of family kSet only, so that e.g. exp is never
// instantiated for integers.
template <Accepts kSet, typename Run>
Buffer dispatch_family(DType dtype, Run&& run) {
  if constexpr (kSet == Accepts::kAny) return dispatch_all(dtype, run);
  else if constexpr (kSet == Accepts::kFloat) return dispatch_float(dtype, run);
  else return dispatch_numeric(dtype, run);
}

// `fn` maps compute values: fn(x, y) for one element of each operand.
template <Accepts kSet, typename Fn>
const ir::Primitive* register_binary(const std::string& name, Fn fn, Vjp vjp) {
  ir::Primitive primitive;
  primitive.name = name;
  primitive.abstract_eval = [name](const std::vector<AbstractValue>& in, const Params&) {
    return std::vector<AbstractValue>{binary_abstract_eval(name, kSet, false, in)};
  };
  primitive.kernel = [fn](const std::vector<const Buffer*>& in, const Params&) {
    return std::vector<Buffer>{dispatch_family<kSet>(in[0]->dtype, [&](auto element) {
      using E = decltype(element);
      return binary_map<E, E>(*in[0], *in[1], fn);
    })};
  };
  primitive.vjp = float_only(std::move(vjp));
  primitive.elementwise = true;
  F32Blocks<Fn>::fn.emplace(fn);
  primitive.f32_block = cpu_has_avx2() ? &F32Blocks<Fn>::binary_avx2 : &F32Blocks<Fn>::binary;
  return ir::register_primitive(std::move(primitive));
}

// Comparisons: any dtype in, bool out, no VJP.
template <typename Fn>
const ir::Primitive* register_comparison(const std::string& name, Fn fn) {
  ir::Primitive primitive;
  primitive.name = name;
  primitive.abstract_eval = [name](const std::vector<AbstractValue>& in, const Params&) {
    return std::vector<AbstractValue>{binary_abstract_eval(name, Accepts::kAny, true, in)};
  };
  primitive.kernel = [fn](const std::vector<const Buffer*>& in, const Params&) {
    return std::vector<Buffer>{dispatch_all(in[0]->dtype, [&](auto element) {
      using E = decltype(element);
      return binary_map<E, BoolElement>(*in[0], *in[1], fn);
    })};
  };
  // In a fused loop the result is a pred held as 1 or 0 in f32 (the bool converts).
  F32Blocks<Fn>::fn.emplace(fn);
  primitive.f32_block = cpu_has_avx2() ? &F32Blocks<Fn>::binary_avx2 : &F32Blocks<Fn>::binary;
  return ir::register_primitive(std::move(primitive));
}

// `fn` maps one compute value; `f32_block`, when given, replaces it for dtypes computed in f32.
template <Accepts kSet, typename Fn>
const ir::Primitive* register_unary(const std::string& name, Fn fn, Vjp vjp,
                                    xla_math::F32BlockFn f32_block = nullptr) {
  ir::Primitive primitive;
  primitive.name = name;
  primitive.abstract_eval = [name](const std::vector<AbstractValue>& in, const Params&) {
    if (in.size() != 1) throw EngineError(name + ": expected 1 operand");
    check_accepts(name, kSet, in);
    return in;
  };
  primitive.kernel = [fn, f32_block](const std::vector<const Buffer*>& in, const Params&) {
    return std::vector<Buffer>{dispatch_family<kSet>(in[0]->dtype, [&](auto element) {
      using E = decltype(element);
      return unary_map<E>(*in[0], fn, f32_block);
    })};
  };
  primitive.vjp = float_only(std::move(vjp));
  primitive.elementwise = true;
  F32Blocks<Fn>::fn.emplace(fn);
  F32Blocks<Fn>::f32_block = f32_block;
  primitive.f32_block = cpu_has_avx2() ? &F32Blocks<Fn>::unary_avx2 : &F32Blocks<Fn>::unary;
  return ir::register_primitive(std::move(primitive));
}

// Shorthands for VJP rules: the operands, the result and the output cotangent.
const Array& x_of(const VjpArgs& args) { return args.inputs[0]; }
const Array& y_of(const VjpArgs& args) { return args.inputs[1]; }
const Array& ans_of(const VjpArgs& args) { return args.outputs[0]; }
const Array& ct_of(const VjpArgs& args) { return args.output_cotangents[0]; }

// lax.py's _balanced_eq(x, z, y): 1 where x attains z, halved where y attains it too, so a tie
// of max/min splits the cotangent evenly between the operands.
Array balanced_eq(const Array& x, const Array& z, const Array& y) {
  Array numerator = where(equal(x, z), ones_like(z), zeros_like(z));
  Array denominator = where(equal(y, z), full(z.shape(), 2.0, z.dtype()), ones_like(z));
  return numerator / denominator;
}

// --- binary arithmetic --------------------------------------------------------------------
// x: [S_x], y: [S_y] -> [S']; each VJP maps ct: [S'] back to [S_x] and [S_y].

const ir::Primitive* kAdd = register_binary<Accepts::kNum>(
    "add",
    [](auto x, auto y) { return wrapping(x, y, [](auto a, auto b) { return a + b; }); },
    [](const VjpArgs& args) {
      return std::vector<Array>{unbroadcast(ct_of(args), x_of(args).shape()),
                                unbroadcast(ct_of(args), y_of(args).shape())};
    });

const ir::Primitive* kSub = register_binary<Accepts::kNum>(
    "sub",
    [](auto x, auto y) { return wrapping(x, y, [](auto a, auto b) { return a - b; }); },
    [](const VjpArgs& args) {
      return std::vector<Array>{unbroadcast(ct_of(args), x_of(args).shape()),
                                unbroadcast(neg(ct_of(args)), y_of(args).shape())};
    });

const ir::Primitive* kMul = register_binary<Accepts::kNum>(
    "mul",
    [](auto x, auto y) { return wrapping(x, y, [](auto a, auto b) { return a * b; }); },
    [](const VjpArgs& args) {
      return std::vector<Array>{unbroadcast(ct_of(args) * y_of(args), x_of(args).shape()),
                                unbroadcast(x_of(args) * ct_of(args), y_of(args).shape())};
    });

// d/dy (x / y) = -x / y^2; written as JAX transposes it: -((ct * y^-2) * x), with
// y^-2 = 1 / (y * y) as lax.integer_pow(y, -2) computes it.
const ir::Primitive* kDiv = register_binary<Accepts::kNum>(
    "div", [](auto x, auto y) { return divide(x, y); },
    [](const VjpArgs& args) {
      const Array& y = y_of(args);
      Array inverse_square = 1.0 / (y * y);
      return std::vector<Array>{
          unbroadcast(ct_of(args) / y, x_of(args).shape()),
          unbroadcast(neg(ct_of(args) * inverse_square * x_of(args)), y.shape())};
    });

const ir::Primitive* kMax = register_binary<Accepts::kAny>(
    "max", [](auto x, auto y) { return maximum_value(x, y); },
    [](const VjpArgs& args) {
      const Array &x = x_of(args), &y = y_of(args), &ans = ans_of(args);
      return std::vector<Array>{unbroadcast(ct_of(args) * balanced_eq(x, ans, y), x.shape()),
                                unbroadcast(ct_of(args) * balanced_eq(y, ans, x), y.shape())};
    });

const ir::Primitive* kMin = register_binary<Accepts::kAny>(
    "min", [](auto x, auto y) { return minimum_value(x, y); },
    [](const VjpArgs& args) {
      const Array &x = x_of(args), &y = y_of(args), &ans = ans_of(args);
      return std::vector<Array>{unbroadcast(ct_of(args) * balanced_eq(x, ans, y), x.shape()),
                                unbroadcast(ct_of(args) * balanced_eq(y, ans, x), y.shape())};
    });

// --- comparisons: [S_x], [S_y] -> bool[S'] ------------------------------------------------

const ir::Primitive* kEq = register_comparison("eq", [](auto x, auto y) { return x == y; });
const ir::Primitive* kNe = register_comparison("ne", [](auto x, auto y) { return x != y; });
const ir::Primitive* kLt = register_comparison("lt", [](auto x, auto y) { return x < y; });
const ir::Primitive* kLe = register_comparison("le", [](auto x, auto y) { return x <= y; });
const ir::Primitive* kGt = register_comparison("gt", [](auto x, auto y) { return x > y; });
const ir::Primitive* kGe = register_comparison("ge", [](auto x, auto y) { return x >= y; });

// --- unary: x: [S] -> [S]; ct: [S] -> [S] -------------------------------------------------

const ir::Primitive* kNeg = register_unary<Accepts::kNum>(
    "neg", [](auto x) { return negate(x); },
    [](const VjpArgs& args) { return std::vector<Array>{neg(ct_of(args))}; });

// f32 (and bf16/f16) as XLA:CPU computes exp; f64 with <cmath>, the oracle runs' precision.
const ir::Primitive* kExp = register_unary<Accepts::kFloat>(
    "exp", [](auto x) { return std::exp(x); },
    [](const VjpArgs& args) { return std::vector<Array>{ct_of(args) * ans_of(args)}; },
    xla_math::exp_f32);

const ir::Primitive* kLog = register_unary<Accepts::kFloat>(
    "log", [](auto x) { return std::log(x); },
    [](const VjpArgs& args) { return std::vector<Array>{ct_of(args) / x_of(args)}; });

// 1 - tanh^2 = (1 + ans)(1 - ans). JAX's JVP is (g + g * ans) * (1 - ans); transposed, the
// cotangent is c + c * ans with c = ct * (1 - ans).
const ir::Primitive* kTanh = register_unary<Accepts::kFloat>(
    "tanh", [](auto x) { return std::tanh(x); },
    [](const VjpArgs& args) {
      Array scaled = ct_of(args) * (1.0 - ans_of(args));
      return std::vector<Array>{scaled + scaled * ans_of(args)};
    },
    xla_math::tanh_f32);  // f32 (and bf16/f16) as XLA:CPU computes it

const ir::Primitive* kSqrt = register_unary<Accepts::kFloat>(
    "sqrt", [](auto x) { return std::sqrt(x); },
    [](const VjpArgs& args) { return std::vector<Array>{ct_of(args) * (0.5 / ans_of(args))}; });

const ir::Primitive* kRsqrt = register_unary<Accepts::kFloat>(
    "rsqrt",
    [](auto x) { return decltype(x)(1) / std::sqrt(x); },
    [](const VjpArgs& args) {
      return std::vector<Array>{ct_of(args) * (-0.5 * (ans_of(args) / x_of(args)))};
    });

// lax.py's _abs_jvp_rule: select(x >= 0, g, -g), so the derivative at 0 is +1.
const ir::Primitive* kAbs = register_unary<Accepts::kSignedNum>(
    "abs", [](auto x) { return absolute(x); },
    [](const VjpArgs& args) {
      return std::vector<Array>{
          where(greater_equal(x_of(args), scalar_like(x_of(args), 0.0)), ct_of(args),
                neg(ct_of(args)))};
    });

// sign is flat: its VJP is zero (lax: defjvp_zero), given as "no cotangent".
const ir::Primitive* kSign = register_unary<Accepts::kNum>(
    "sign", [](auto x) { return sign_value(x); },
    [](const VjpArgs& args) { return std::vector<Array>(args.inputs.size()); });

// --- select_n ------------------------------------------------------------------------------
// which: bool[S] or i32[S] (or 0-d), cases: n arrays [S] of one dtype -> [S]; element i is
// cases[which[i]][i] (for bool which: case0 where false, case1 where true).

std::vector<AbstractValue> select_n_abstract_eval(const std::vector<AbstractValue>& in,
                                                  const Params&) {
  if (in.size() < 2) throw EngineError("select_n: needs a predicate and at least one case");
  const AbstractValue& which = in[0];
  if (which.dtype != DType::bool_ && which.dtype != DType::i32) {
    throw EngineError("select_n: which must be bool or i32, got " + type_of(which));
  }
  size_t num_cases = in.size() - 1;
  if (which.dtype == DType::bool_ && num_cases > 2) {
    throw EngineError("select_n: a bool which selects between at most 2 cases, got " +
                      std::to_string(num_cases));
  }
  for (size_t i = 2; i < in.size(); ++i) {
    if (in[i].dtype != in[1].dtype || in[i].shape != in[1].shape) {
      throw EngineError("select_n: cases must have the same type, got " + type_of(in[1]) +
                        " and " + type_of(in[i]));
    }
  }
  if (!which.shape.empty() && which.shape != in[1].shape) {
    throw EngineError("select_n: which " + type_of(which) +
                      " must be 0-d or have the cases' shape, got cases " + type_of(in[1]));
  }
  return {in[1]};
}

std::vector<Buffer> select_n_kernel(const std::vector<const Buffer*>& in, const Params&) {
  const Buffer& which = *in[0];
  const Buffer& first_case = *in[1];
  const size_t num_cases = in.size() - 1;
  Buffer output = Buffer::allocate_uninitialized(first_case.dtype, first_case.shape);  // in full
  size_t num_elements = output.num_elements();
  bool scalar_which = which.shape.empty();
  auto chosen = [&](size_t i) -> size_t {
    size_t at = scalar_which ? 0 : i;
    int64_t k = which.dtype == DType::bool_ ? which.data<uint8_t>()[at] != 0
                                            : which.data<int32_t>()[at];
    // Out-of-range indices are undefined in lax.select_n; clamp rather than read wild memory.
    return static_cast<size_t>(std::clamp<int64_t>(k, 0, static_cast<int64_t>(num_cases) - 1));
  };
  dispatch_width(first_case.dtype, [&](auto width) {
    using T = typename decltype(width)::Storage;
    T* out = output.data<T>();
    for (size_t i = 0; i < num_elements; ++i) out[i] = in[1 + chosen(i)]->data<T>()[i];
  });
  return {output};
}

// Each case receives the cotangent where it was chosen and zero elsewhere (lax.py:
// _select_transpose_rule); the predicate has none.
// ct: [S] -> (none, [S], ..., [S])
std::vector<Array> select_n_vjp(const VjpArgs& args) {
  const Array& ct = ct_of(args);
  const Array& which = args.inputs[0];
  std::vector<Array> cotangents(args.inputs.size());
  if (!ct.valid() || !is_floating(ct.dtype())) return cotangents;
  Array zeros = zeros_like(ct);
  if (which.dtype() == DType::bool_) {
    cotangents[1] = where(which, zeros, ct);  // case0 is taken where which is false
    if (cotangents.size() > 2) cotangents[2] = where(which, ct, zeros);
    return cotangents;
  }
  for (size_t k = 1; k < args.inputs.size(); ++k) {
    Array taken = equal(which, Array::scalar(static_cast<double>(k - 1), DType::i32));
    cotangents[k] = where(taken, ct, zeros);
  }
  return cotangents;
}

// select_n's F32Block (ir/primitive.h) for a pred `which` and two cases, as loop fusion runs it
// (a pred is 0 or 1 in f32 there): case1 where which is nonzero, else case0, each value copied
// as it is, as select_n_kernel does. kScalar0/1: whether that case is one value for all.
template <bool kScalar0, bool kScalar1>
__attribute__((always_inline)) inline void select_rows(const float* which, const float* case0,
                                                       const float* case1, float* out, size_t n) {
  // Both cases are read whatever `which` says, so that the loop is a branch-free blend.
  for (size_t i = 0; i < n; ++i) {
    const float if_false = case0[kScalar0 ? 0 : i];
    const float if_true = case1[kScalar1 ? 0 : i];
    out[i] = which[i] != 0.0f ? if_true : if_false;
  }
}

__attribute__((always_inline)) inline void select_n_loops(const float* const* in,
                                                          const bool* scalar, float* out,
                                                          size_t n) {
  if (scalar[0]) {  // one predicate: the chosen case throughout
    const size_t chosen = in[0][0] != 0.0f ? 2 : 1;
    if (scalar[chosen]) {
      std::fill(out, out + n, in[chosen][0]);
    } else {
      std::copy(in[chosen], in[chosen] + n, out);
    }
  } else if (!scalar[1] && !scalar[2]) {
    select_rows<false, false>(in[0], in[1], in[2], out, n);
  } else if (scalar[1] && !scalar[2]) {
    select_rows<true, false>(in[0], in[1], in[2], out, n);
  } else if (!scalar[1]) {
    select_rows<false, true>(in[0], in[1], in[2], out, n);
  } else {
    select_rows<true, true>(in[0], in[1], in[2], out, n);
  }
}

void select_n_f32_block(const float* const* in, const bool* scalar, float* out, size_t n) {
  select_n_loops(in, scalar, out, n);
}
__attribute__((target("avx2"))) void select_n_f32_block_avx2(const float* const* in,
                                                             const bool* scalar, float* out,
                                                             size_t n) {
  select_n_loops(in, scalar, out, n);
}

const ir::Primitive* kSelectN = [] {
  ir::Primitive primitive{"select_n", select_n_abstract_eval, select_n_kernel, select_n_vjp};
  primitive.f32_block = cpu_has_avx2() ? &select_n_f32_block_avx2 : &select_n_f32_block;
  primitive.f32_block_arity = 3;  // a pred `which` and two cases
  return ir::register_primitive(std::move(primitive));
}();

// --- public-function helpers --------------------------------------------------------------

Array apply_binary(const ir::Primitive& primitive, const Array& a, const Array& b) {
  PromotedOperands operands = promote_binary_operands(primitive.name.c_str(), a, b);
  return ir::bind1(primitive, {operands.lhs, operands.rhs});
}

// jnp's transcendental functions promote integer and bool inputs to the default float
// (promote_args_inexact).
Array as_inexact(const char* op, const Array& x) {
  check_valid_operand(op, x);
  return is_floating(x.dtype()) ? x : astype(x, DType::f32);
}

Array apply_float_unary(const ir::Primitive& primitive, const Array& x) {
  return ir::bind1(primitive, {as_inexact(primitive.name.c_str(), x)});
}

}  // namespace

// --- public functions ---------------------------------------------------------------------

Array add(const Array& a, const Array& b) { return apply_binary(*kAdd, a, b); }
Array sub(const Array& a, const Array& b) { return apply_binary(*kSub, a, b); }
Array mul(const Array& a, const Array& b) { return apply_binary(*kMul, a, b); }
Array maximum(const Array& a, const Array& b) { return apply_binary(*kMax, a, b); }
Array minimum(const Array& a, const Array& b) { return apply_binary(*kMin, a, b); }

// jnp.divide is true_divide: integer and bool operands divide as the default float.
Array div(const Array& a, const Array& b) {
  Shape shape = broadcast_shapes("div", {a, b});
  DType dtype = promote_types("div", a.dtype(), b.dtype());
  if (!is_floating(dtype)) dtype = DType::f32;
  Array lhs = promote_rank(convert_if_needed(a, dtype), shape.size());
  Array rhs = promote_rank(convert_if_needed(b, dtype), shape.size());
  return ir::bind1(*kDiv, {lhs, rhs});
}

Array neg(const Array& x) {
  check_valid_operand("neg", x);
  return ir::bind1(*kNeg, {x});
}
Array exp(const Array& x) { return apply_float_unary(*kExp, x); }
Array log(const Array& x) { return apply_float_unary(*kLog, x); }
Array tanh(const Array& x) { return apply_float_unary(*kTanh, x); }
Array sqrt(const Array& x) { return apply_float_unary(*kSqrt, x); }
Array rsqrt(const Array& x) { return apply_float_unary(*kRsqrt, x); }

// jnp.absolute leaves unsigned and bool arrays as they are.
Array abs(const Array& x) {
  check_valid_operand("abs", x);
  if (x.dtype() == DType::u32 || x.dtype() == DType::bool_) return x;
  return ir::bind1(*kAbs, {x});
}

Array sign(const Array& x) {
  check_valid_operand("sign", x);
  return ir::bind1(*kSign, {x});
}

// jnp.square of a float is x * x (d/dx = 2x through mul's VJP).
Array square(const Array& x) { return mul(x, x); }

Array operator+(const Array& a, const Array& b) { return add(a, b); }
Array operator-(const Array& a, const Array& b) { return sub(a, b); }
Array operator*(const Array& a, const Array& b) { return mul(a, b); }
Array operator/(const Array& a, const Array& b) { return div(a, b); }
Array operator-(const Array& x) { return neg(x); }
Array operator+(const Array& a, double b) { return add(a, weak_scalar("add", a, b)); }
Array operator-(const Array& a, double b) { return sub(a, weak_scalar("sub", a, b)); }
Array operator*(const Array& a, double b) { return mul(a, weak_scalar("mul", a, b)); }
Array operator/(const Array& a, double b) { return div(a, weak_scalar("div", a, b)); }
Array operator+(double a, const Array& b) { return add(weak_scalar("add", b, a), b); }
Array operator-(double a, const Array& b) { return sub(weak_scalar("sub", b, a), b); }
Array operator*(double a, const Array& b) { return mul(weak_scalar("mul", b, a), b); }
Array operator/(double a, const Array& b) { return div(weak_scalar("div", b, a), b); }

Array equal(const Array& a, const Array& b) { return apply_binary(*kEq, a, b); }
Array not_equal(const Array& a, const Array& b) { return apply_binary(*kNe, a, b); }
Array less(const Array& a, const Array& b) { return apply_binary(*kLt, a, b); }
Array less_equal(const Array& a, const Array& b) { return apply_binary(*kLe, a, b); }
Array greater(const Array& a, const Array& b) { return apply_binary(*kGt, a, b); }
Array greater_equal(const Array& a, const Array& b) { return apply_binary(*kGe, a, b); }

// jnp.where (jax/_src/numpy/util.py: _where): a non-bool condition means `condition != 0`; the
// branches promote to one dtype; all three broadcast to one shape; then
// select_n(condition, if_false, if_true).
Array where(const Array& condition, const Array& if_true, const Array& if_false) {
  Shape shape = broadcast_shapes("where", {condition, if_true, if_false});
  DType dtype = promote_types("where", if_true.dtype(), if_false.dtype());
  Array predicate = condition.dtype() == DType::bool_
                        ? condition
                        : not_equal(condition, Array::scalar(0.0, condition.dtype()));
  return ir::bind1(*kSelectN, {broadcast_to(predicate, shape),
                               broadcast_to(convert_if_needed(if_false, dtype), shape),
                               broadcast_to(convert_if_needed(if_true, dtype), shape)});
}

}  // namespace pmap_engine
