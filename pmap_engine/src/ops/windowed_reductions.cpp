// Windowed reductions for pooling: reduce_window_sum and reduce_window_max (lax.reduce_window
// with lax.add / lax.max), and select_and_scatter_add, which reduce_window_max's VJP is made
// of. Source modelled: jax-ml/jax commit cec06d1, jax/_src/lax/windowed_reductions.py.
//
// Params (one entry per dimension of the operand, ops/window_geometry.h's vocabulary):
// window_dimensions, window_strides, padding (lo_0, hi_0, lo_1, hi_1, ...); reduce_window_sum
// also has base_dilation, which only its own transpose sets. Window dilation is always 1.
//
// Kernels visit, for each output element, the operand elements of its window in row-major
// window order, leaving out padding (which adds 0 to a sum and -inf to a max: nothing) and
// dilation holes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/primitive.h"
#include "ops/broadcasting.h"
#include "ops/kernel_util.h"
#include "ops/window_geometry.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

struct WindowParams {
  std::vector<int64_t> window_dimensions;
  std::vector<int64_t> window_strides;
  std::vector<PadPair> padding;
  std::vector<int64_t> base_dilation;

  static WindowParams from(const ir::Params& params) {
    const std::vector<PadPair> padding = pad_pairs_from_flat(params.ints("padding"));
    const std::vector<int64_t>& window = params.ints("window_dimensions");
    return {window, params.ints("window_strides"), padding,
            params.has("base_dilation") ? params.ints("base_dilation")
                                        : std::vector<int64_t>(window.size(), 1)};
  }
  // `with_base_dilation`: reduce_window_sum's params; the others have none.
  ir::Params params(bool with_base_dilation) const {
    std::vector<int64_t> flat;
    for (const auto& [lo, hi] : padding) {
      flat.push_back(lo);
      flat.push_back(hi);
    }
    ir::Params result{{"window_dimensions", window_dimensions},
                      {"window_strides", window_strides},
                      {"padding", flat}};
    if (with_base_dilation) result.set("base_dilation", base_dilation);
    return result;
  }
  std::vector<WindowDim> dims(const Shape& operand_shape) const {
    std::vector<WindowDim> result;
    for (size_t d = 0; d < operand_shape.size(); ++d) {
      result.push_back({operand_shape[d], window_dimensions[d], window_strides[d], padding[d],
                        base_dilation[d], 1});
    }
    return result;
  }
};

// windowed_reductions.py _common_reduce_window_shape_rule / reduce_window_shape_tuple.
Shape window_output_shape(const char* op, const ir::AbstractValue& operand, const WindowParams& p) {
  const size_t ndim = operand.shape.size();
  const auto positive = [](const std::vector<int64_t>& values) {
    return std::all_of(values.begin(), values.end(), [](int64_t v) { return v >= 1; });
  };
  if (p.window_dimensions.size() != ndim || p.window_strides.size() != ndim ||
      p.padding.size() != ndim || p.base_dilation.size() != ndim ||
      !positive(p.window_dimensions) || !positive(p.window_strides) || !positive(p.base_dilation)) {
    throw EngineError(
        std::string(op) + ": window_dimensions " + tuple_to_string(p.window_dimensions) +
        " and window_strides " + tuple_to_string(p.window_strides) +
        " must be positive, and they and the padding pairs (" + std::to_string(p.padding.size()) +
        ") one per dimension of the operand " + type_of(operand));
  }
  Shape out;
  for (const WindowDim& dim : p.dims(operand.shape)) {
    if (dilate_dim(dim.size, dim.base_dilation) + dim.padding.first + dim.padding.second < 0) {
      throw EngineError(std::string(op) + ": negative padding (" +
                        std::to_string(dim.padding.first) + ", " +
                        std::to_string(dim.padding.second) +
                        ") is larger than the dimension it pads, for operand " + type_of(operand));
    }
    out.push_back(dim.output_size());
  }
  return out;
}

ir::AbstractValue reduce_window_abstract_eval(const char* op, const ir::AbstractValue& operand,
                                              const WindowParams& p) {
  if (operand.dtype == DType::bool_) {
    throw EngineError(std::string(op) + ": expects a numeric operand, got " + type_of(operand));
  }
  return {operand.dtype, window_output_shape(op, operand, p)};
}

// Calls fn(output_index, offsets) for each element of the output, where `offsets` lists the
// operand offsets its window reads, in row-major window order.
template <typename Fn>
void for_each_window(const Shape& operand_shape, const WindowParams& p, Fn&& fn) {
  const std::vector<WindowDim> dims = p.dims(operand_shape);
  const size_t ndim = dims.size();
  std::vector<std::vector<int64_t>> taps;
  Shape out_shape;
  for (const WindowDim& dim : dims) {
    taps.push_back(dim.taps());
    out_shape.push_back(dim.output_size());
  }
  const std::vector<int64_t> strides = row_major_strides(operand_shape);
  const size_t window_size = shape_num_elements(p.window_dimensions);
  std::vector<int64_t> out_index(ndim, 0);
  std::vector<int64_t> tap(ndim, 0);
  std::vector<int64_t> offsets;
  const size_t num_out = shape_num_elements(out_shape);
  for (size_t flat = 0; flat < num_out; ++flat) {
    offsets.clear();
    std::fill(tap.begin(), tap.end(), 0);
    for (size_t visited = 0; visited < window_size; ++visited) {
      int64_t offset = 0;
      bool reads_operand = true;
      for (size_t d = 0; d < ndim && reads_operand; ++d) {
        const int64_t index = taps[d][static_cast<size_t>(out_index[d] * dims[d].window + tap[d])];
        reads_operand = index >= 0;
        offset += index * strides[d];
      }
      if (reads_operand) offsets.push_back(offset);
      for (size_t d = ndim; d-- > 0;) {  // next tap, row-major
        if (++tap[d] < dims[d].window) break;
        tap[d] = 0;
      }
    }
    fn(flat, offsets);
    for (size_t d = ndim; d-- > 0;) {  // next output element, row-major
      if (++out_index[d] < out_shape[d]) break;
      out_index[d] = 0;
    }
  }
}

Buffer reduce_window_sum_kernel(const Buffer& x, const WindowParams& p) {
  Buffer out =
      Buffer::allocate(x.dtype, window_output_shape("reduce_window_sum", {x.dtype, x.shape}, p));
  dispatch_numeric(x.dtype, [&](auto element) {
    using E = decltype(element);
    const auto* in = x.data<typename E::Storage>();
    auto* result = out.data<typename E::Storage>();
    for_each_window(x.shape, p, [&](size_t index, const std::vector<int64_t>& offsets) {
      typename E::Compute total{0};
      for (int64_t offset : offsets) {
        total = wrapping_add(total, E::load(in[static_cast<size_t>(offset)]));
      }
      result[index] = E::store(total);
    });
  });
  return out;
}

// lax.max: NaN propagates.
template <typename T>
T max_propagating_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a < b ? b : a;
}

// A window of padding only gives the identity of max: -inf (the lowest value for integers).
Buffer reduce_window_max_kernel(const Buffer& x, const WindowParams& p) {
  Buffer out =
      Buffer::allocate(x.dtype, window_output_shape("reduce_window_max", {x.dtype, x.shape}, p));
  dispatch_numeric(x.dtype, [&](auto element) {
    using E = decltype(element);
    using Compute = typename E::Compute;
    const auto* in = x.data<typename E::Storage>();
    auto* result = out.data<typename E::Storage>();
    for_each_window(x.shape, p, [&](size_t index, const std::vector<int64_t>& offsets) {
      Compute best = std::numeric_limits<Compute>::has_infinity
                         ? -std::numeric_limits<Compute>::infinity()
                         : std::numeric_limits<Compute>::lowest();
      for (int64_t offset : offsets) {
        best = max_propagating_nan(best, E::load(in[static_cast<size_t>(offset)]));
      }
      result[index] = E::store(best);
    });
  });
  return out;
}

// select_and_scatter_add(source, operand): zeros of the operand's shape, to which each window
// adds its source element at the one operand element it selects. The selection is XLA's
// SelectAndScatter with select = ge (windowed_reductions.py _select_and_scatter_add_impl): the
// window's elements are visited in row-major order and the current selection is kept while
// select(current, candidate) = current >= candidate holds, so among equal maxima the FIRST one
// in row-major window order gets the whole cotangent (PyTorch's max_pool2d backward picks the
// first as well). A NaN candidate is selected (current >= NaN is false). Padding is never
// selected. source: the windows' shape; operand and result: the operand's shape.
Buffer select_and_scatter_add_kernel(const Buffer& source, const Buffer& operand,
                                     const WindowParams& p) {
  Buffer out = Buffer::allocate(operand.dtype, operand.shape);
  dispatch_float(operand.dtype, [&](auto element) {
    using E = decltype(element);
    const auto* values = operand.data<typename E::Storage>();
    const auto* updates = source.data<typename E::Storage>();
    std::vector<typename E::Compute> sums(operand.num_elements(), 0);
    for_each_window(operand.shape, p, [&](size_t index, const std::vector<int64_t>& offsets) {
      if (offsets.empty()) return;
      size_t selected = static_cast<size_t>(offsets[0]);
      for (int64_t offset : offsets) {
        const size_t candidate = static_cast<size_t>(offset);
        if (!(E::load(values[selected]) >= E::load(values[candidate]))) selected = candidate;
      }
      sums[selected] += E::load(updates[index]);
    });
    auto* result = out.data<typename E::Storage>();
    for (size_t i = 0; i < sums.size(); ++i) result[i] = E::store(sums[i]);
  });
  return out;
}

const ir::Primitive* kSelectAndScatterAdd = ir::register_primitive({
    "select_and_scatter_add",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      const ir::AbstractValue& source = inputs.at(0);
      const ir::AbstractValue& operand = inputs.at(1);
      const Shape windows =
          window_output_shape("select_and_scatter_add", operand, WindowParams::from(params));
      if (!is_floating(operand.dtype) || source.dtype != operand.dtype || source.shape != windows) {
        throw EngineError("select_and_scatter_add: source " + type_of(source) +
                          " must have the operand's floating dtype and the windows' shape " +
                          tuple_to_string(windows) + ", for operand " + type_of(operand));
      }
      return std::vector<ir::AbstractValue>{operand};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{
          select_and_scatter_add_kernel(*inputs[0], *inputs[1], WindowParams::from(params))};
    },
    // No VJP: select_and_scatter_add appears only as reduce_window_max's VJP, and nothing in
    // the engine differentiates max pooling twice. (JAX's transpose with respect to the source
    // would be _select_and_gather_add.) Differentiating through it gives no cotangent.
    nullptr,
});

// windowed_reductions.py _reduce_window_chooser_jvp_rule (select_prim = ge_p) transposed
// (_select_and_gather_add_transpose): the cotangent of each window goes to its maximum.
// ct: windows' shape -> operand's shape
std::vector<Array> reduce_window_max_vjp(const ir::VjpArgs& args) {
  const WindowParams p = WindowParams::from(args.params);
  return {ir::bind1(*kSelectAndScatterAdd, {args.output_cotangents[0], args.inputs[0]},
                    p.params(/*with_base_dilation=*/false))};
}

const ir::Primitive* kReduceWindowMax = ir::register_primitive({
    "reduce_window_max",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      return std::vector<ir::AbstractValue>{reduce_window_abstract_eval(
          "reduce_window_max", inputs.at(0), WindowParams::from(params))};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{reduce_window_max_kernel(*inputs[0], WindowParams::from(params))};
    },
    reduce_window_max_vjp,
});

// reduce_window_sum on explicit params; defined after the primitive's registration.
Array bind_reduce_window_sum(const Array& x, const WindowParams& p);

// windowed_reductions.py _reduce_window_sum_transpose_rule: each operand element receives the
// cotangents of the windows that read it. JAX pads the cotangent with
// _conv_general_vjp_lhs_padding's pairs and stride - 1 interior zeros between its elements,
// then sums windows of the same size strided by base_dilation. The interior zeros are a base
// dilation by the forward strides, so that is one reduce_window_sum here.
// ct: windows' shape -> operand's shape
std::vector<Array> reduce_window_sum_vjp(const ir::VjpArgs& args) {
  const WindowParams p = WindowParams::from(args.params);
  const Array& ct = args.output_cotangents[0];
  const std::vector<int64_t> ones(p.window_dimensions.size(), 1);
  const WindowParams t{
      p.window_dimensions, p.base_dilation,
      conv_general_vjp_lhs_padding(args.inputs[0].shape(), p.window_dimensions, p.window_strides,
                                   ct.shape(), p.padding, p.base_dilation, ones),
      p.window_strides};
  return {bind_reduce_window_sum(ct, t)};
}

const ir::Primitive* kReduceWindowSum = ir::register_primitive({
    "reduce_window_sum",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      return std::vector<ir::AbstractValue>{reduce_window_abstract_eval(
          "reduce_window_sum", inputs.at(0), WindowParams::from(params))};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{reduce_window_sum_kernel(*inputs[0], WindowParams::from(params))};
    },
    reduce_window_sum_vjp,
});

Array bind_reduce_window_sum(const Array& x, const WindowParams& p) {
  return ir::bind1(*kReduceWindowSum, {x}, p.params(/*with_base_dilation=*/true));
}

// The params of a public reduce_window: a padding name resolves over every dimension, as
// lax.reduce_window does.
WindowParams public_params(const char* op, const Array& x,
                           const std::vector<int64_t>& window_dimensions,
                           const std::vector<int64_t>& window_strides, const Padding& padding) {
  check_valid_operand(op, x);
  if (window_dimensions.size() != x.shape().size() || window_strides.size() != x.shape().size()) {
    throw EngineError(
        std::string(op) + ": window_dimensions " + tuple_to_string(window_dimensions) +
        " and window_strides " + tuple_to_string(window_strides) +
        " need one entry per dimension of the operand " + type_to_string(x.dtype(), x.shape()));
  }
  return {window_dimensions, window_strides,
          resolve_padding(op, padding, x.shape(), window_dimensions, window_strides),
          std::vector<int64_t>(window_dimensions.size(), 1)};
}

}  // namespace

Array reduce_window_sum(const Array& x, const std::vector<int64_t>& window_dimensions,
                        const std::vector<int64_t>& window_strides, const Padding& padding) {
  const WindowParams p =
      public_params("reduce_window_sum", x, window_dimensions, window_strides, padding);
  return bind_reduce_window_sum(x, p);
}

Array reduce_window_max(const Array& x, const std::vector<int64_t>& window_dimensions,
                        const std::vector<int64_t>& window_strides, const Padding& padding) {
  const WindowParams p =
      public_params("reduce_window_max", x, window_dimensions, window_strides, padding);
  return ir::bind1(*kReduceWindowMax, {x}, p.params(/*with_base_dilation=*/false));
}

}  // namespace pmap_engine
