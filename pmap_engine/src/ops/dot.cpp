// dot_general (lax.dot_general): its shape rule, its VJP, and jnp.matmul on top of it. The
// kernel, and the dimension numbers' vocabulary, are in ops/dot_kernel.h.

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "ir/primitive.h"
#include "ops/broadcasting.h"
#include "ops/dot_kernel.h"
#include "ops/kernel_util.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

bool has_duplicates(std::vector<int64_t> dims) {
  std::sort(dims.begin(), dims.end());
  return std::adjacent_find(dims.begin(), dims.end()) != dims.end();
}

bool overlaps(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (int64_t d : a) {
    if (std::find(b.begin(), b.end(), d) != b.end()) return true;
  }
  return false;
}

// lax.py _dot_general_shape_rule's checks; every message names both operands.
void check_side(const char* side, const std::vector<int64_t>& contracting,
                const std::vector<int64_t>& batch, size_t ndim, const std::string& operands) {
  for (const auto* dims : {&contracting, &batch}) {
    for (int64_t d : *dims) {
      if (d < 0 || d >= static_cast<int64_t>(ndim)) {
        throw EngineError(std::string("dot_general: requires ") + side +
                          " dimension numbers to be nonnegative and less than the number of "
                          "axes of the " +
                          side + " value, got " + side + "_batch of " + tuple_to_string(batch) +
                          " and " + side + "_contracting of " + tuple_to_string(contracting) +
                          " for " + operands);
      }
    }
  }
  if (has_duplicates(batch) || has_duplicates(contracting) || overlaps(batch, contracting)) {
    throw EngineError(std::string("dot_general: requires ") + side +
                      " batch and contracting dimensions to be distinct and disjoint, got " + side +
                      "_batch " + tuple_to_string(batch) + " and " + side + "_contracting " +
                      tuple_to_string(contracting) + " for " + operands);
  }
}

ir::AbstractValue dot_general_abstract_eval(const ir::AbstractValue& lhs,
                                            const ir::AbstractValue& rhs,
                                            const DotDimensionNumbers& dn) {
  const std::string operands =
      type_to_string(lhs.dtype, lhs.shape) + " and " + type_to_string(rhs.dtype, rhs.shape);
  if (lhs.dtype != rhs.dtype || lhs.dtype == DType::bool_) {
    throw EngineError("dot_general: operands must have the same numeric dtype, got " + operands +
                      " (convert with astype, or use matmul, which promotes)");
  }
  check_side("lhs", dn.lhs_contracting, dn.lhs_batch, lhs.shape.size(), operands);
  check_side("rhs", dn.rhs_contracting, dn.rhs_batch, rhs.shape.size(), operands);
  if (dn.lhs_batch.size() != dn.rhs_batch.size()) {
    throw EngineError(
        "dot_general: requires equal numbers of lhs_batch and rhs_batch "
        "dimensions, got lhs_batch " +
        tuple_to_string(dn.lhs_batch) + " and rhs_batch " + tuple_to_string(dn.rhs_batch) +
        " for " + operands);
  }
  // The sizes of the paired dimensions `lhs_dims` of lhs and `rhs_dims` of rhs must agree.
  auto require_same_sizes = [&](const char* which, const std::vector<int64_t>& lhs_dims,
                                const std::vector<int64_t>& rhs_dims) {
    const Shape lhs_sizes = dims_of(lhs.shape, lhs_dims);
    const Shape rhs_sizes = dims_of(rhs.shape, rhs_dims);
    if (lhs_sizes != rhs_sizes) {
      throw EngineError(std::string("dot_general: requires ") + which +
                        " to have the same shape, got " + tuple_to_string(lhs_sizes) + " and " +
                        tuple_to_string(rhs_sizes) + " for " + operands);
    }
  };
  require_same_sizes("lhs batch dimensions and rhs batch dimensions", dn.lhs_batch, dn.rhs_batch);
  require_same_sizes("contracting dimensions", dn.lhs_contracting, dn.rhs_contracting);
  return {lhs.dtype, dot_general_shape(lhs.shape, rhs.shape, dn)};
}

// --- VJP (lax.py _dot_general_transpose_lhs / _dot_general_transpose_rhs) ---
//
// The cotangent of x in ans = dot_general(x, y) is another dot_general: contract g with y over
// y's free dimensions (their positions in ans), batch over the batch dimensions, and what is
// left is [batch, x free, x contracting (in y's contracting order)]; a transpose puts those
// back in x's dimension order.

std::vector<int64_t> consecutive(int64_t start, size_t count) {
  std::vector<int64_t> range(count);
  std::iota(range.begin(), range.end(), start);
  return range;
}

std::vector<int64_t> argsort(const std::vector<int64_t>& values) {
  std::vector<int64_t> order = consecutive(0, values.size());
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
    return values[static_cast<size_t>(i)] < values[static_cast<size_t>(j)];
  });
  return order;
}

// g: ans' shape, x: [..] the operand to differentiate, y: the other one; dn names x as lhs.
// `swap_ans`: ans holds y's free dimensions before x's (x was the rhs of the forward dot).
Array dot_general_transpose_lhs(const Array& g, const Array& x, const Array& y,
                                const DotDimensionNumbers& dn, bool swap_ans) {
  const std::vector<int64_t> x_kept = remaining(x.ndim(), dn.lhs_contracting, dn.lhs_batch);
  const std::vector<int64_t> y_kept = remaining(y.ndim(), dn.rhs_contracting, dn.rhs_batch);
  const size_t num_batch = dn.lhs_batch.size();
  const std::vector<int64_t> ans_batch = consecutive(0, num_batch);
  const std::vector<int64_t> ans_y =
      swap_ans ? consecutive(static_cast<int64_t>(num_batch), y_kept.size())
               : consecutive(static_cast<int64_t>(num_batch + x_kept.size()), y_kept.size());
  // [batch, x kept, x contracting sorted by y's contracting order]
  Array product = dot_general(g, y, ans_y, y_kept, ans_batch, dn.rhs_batch);
  std::vector<int64_t> unsorted_axes = dn.lhs_batch;
  unsorted_axes.insert(unsorted_axes.end(), x_kept.begin(), x_kept.end());
  for (int64_t i : argsort(dn.rhs_contracting)) {
    unsorted_axes.push_back(dn.lhs_contracting[static_cast<size_t>(i)]);
  }
  return transpose(product, argsort(unsorted_axes));
}

// ans: [B, M, N] = dot_general(lhs, rhs); g: [B, M, N] -> (lhs_ct: lhs' shape, rhs_ct: rhs')
std::vector<Array> dot_general_vjp(const ir::VjpArgs& args) {
  const Array& lhs = args.inputs[0];
  const Array& rhs = args.inputs[1];
  const Array& g = args.output_cotangents[0];
  const DotDimensionNumbers dn = DotDimensionNumbers::from(args.params);
  const DotDimensionNumbers swapped{dn.rhs_contracting, dn.lhs_contracting, dn.rhs_batch,
                                 dn.lhs_batch};
  // Only the operands that need one get a cotangent: for x @ W with data x, dW alone (a
  // third of the matmul work saved).
  return {args.needs(0) ? dot_general_transpose_lhs(g, lhs, rhs, dn, /*swap_ans=*/false) : Array(),
          args.needs(1) ? dot_general_transpose_lhs(g, rhs, lhs, swapped, /*swap_ans=*/true)
                        : Array()};
}

const ir::Primitive* kDotGeneral = ir::register_primitive({
    "dot_general",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      return std::vector<ir::AbstractValue>{
          dot_general_abstract_eval(inputs.at(0), inputs.at(1), DotDimensionNumbers::from(params))};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{
          dot_general_kernel(*inputs[0], *inputs[1], DotDimensionNumbers::from(params))};
    },
    dot_general_vjp,
});

// Drops size-1 dimensions `dims` (ascending) of x: lax.squeeze, as a reshape.
Array squeeze(const Array& x, const std::vector<int64_t>& dims) {
  if (dims.empty()) return x;
  Shape kept;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      kept.push_back(x.shape()[static_cast<size_t>(d)]);
    }
  }
  return reshape(x, kept);
}

}  // namespace

Array dot_general(const Array& lhs, const Array& rhs, const std::vector<int64_t>& lhs_contracting,
                  const std::vector<int64_t>& rhs_contracting,
                  const std::vector<int64_t>& lhs_batch, const std::vector<int64_t>& rhs_batch) {
  check_valid_operand("dot_general", lhs);
  check_valid_operand("dot_general", rhs);
  const DotDimensionNumbers dn{lhs_contracting, rhs_contracting, lhs_batch, rhs_batch};
  return ir::bind1(*kDotGeneral, {lhs, rhs}, dn.params());
}

// jnp.matmul (jax/_src/numpy/tensor_contractions.py): 1-D operands are vectors (contracted,
// their dimension absent from the result); leading dimensions of >2-D operands are batch
// dimensions, broadcast as NumPy does (a missing or size-1 dimension repeats the other side).
// a: [..., M, K] @ b: [..., K, N] -> [..., M, N]. Dtypes are promoted first.
Array matmul(const Array& a_in, const Array& b_in) {
  check_valid_operand("matmul", a_in);
  check_valid_operand("matmul", b_in);
  const std::string operands = type_to_string(a_in.dtype(), a_in.shape()) + " and " +
                               type_to_string(b_in.dtype(), b_in.shape());
  for (const auto& [position, operand] : {std::pair{0, &a_in}, std::pair{1, &b_in}}) {
    if (operand->ndim() < 1) {
      throw EngineError("matmul: input operand " + std::to_string(position) +
                        " must have ndim at least 1, but it has ndim 0 (" + operands + ")");
    }
  }
  const DType dtype = promote_types("matmul", a_in.dtype(), b_in.dtype());
  Array a = convert_if_needed(a_in, dtype);
  Array b = convert_if_needed(b_in, dtype);
  const bool a_is_mat = a.ndim() > 1;
  const bool b_is_mat = b.ndim() > 1;
  const int64_t a_contracting_size = a.shape().back();
  const int64_t b_contracting_size = b.shape()[static_cast<size_t>(b.ndim() - (b_is_mat ? 2 : 1))];
  if (a_contracting_size != b_contracting_size) {
    // The same TypeError at both tags: jax-v0.4.38 and jax-v0.11.0 jax/_src/lax/lax.py
    // _dot_general_shape_rule.
    throw EngineError(
        "matmul: dot_general requires contracting dimensions to have the same "
        "shape, got (" +
        std::to_string(a_contracting_size) + ",) and (" + std::to_string(b_contracting_size) +
        ",) for " + operands);
  }

  // Batch dimensions, right-aligned; -1 where an operand has none.
  const Shape a_batch_sizes(a.shape().begin(), a.shape().end() - (a_is_mat ? 2 : a.ndim()));
  const Shape b_batch_sizes(b.shape().begin(), b.shape().end() - (b_is_mat ? 2 : b.ndim()));
  const size_t num_batch = std::max(a_batch_sizes.size(), b_batch_sizes.size());
  auto batch_size_at = [&](const Shape& sizes, size_t i) {
    const size_t missing = num_batch - sizes.size();
    return i < missing ? int64_t{-1} : sizes[i - missing];
  };
  std::vector<int64_t> a_squeeze, b_squeeze, both_squeeze;   // operand / output dimensions
  std::vector<int64_t> a_batch, b_batch;                     // dot_general batch dims
  std::vector<int64_t> idx_batch, idx_a_other, idx_b_other;  // output positions
  auto a_seen = [&] {
    return static_cast<int64_t>(idx_batch.size() + idx_a_other.size() + a_squeeze.size());
  };
  auto b_seen = [&] {
    return static_cast<int64_t>(idx_batch.size() + idx_b_other.size() + b_squeeze.size());
  };
  for (size_t i = 0; i < num_batch; ++i) {
    const int64_t a_size = batch_size_at(a_batch_sizes, i);
    const int64_t b_size = batch_size_at(b_batch_sizes, i);
    const int64_t position = static_cast<int64_t>(i);
    if (a_size < 0) {
      idx_b_other.push_back(position);
    } else if (b_size < 0) {
      idx_a_other.push_back(position);
    } else if (a_size == 1 && b_size == 1) {
      a_squeeze.push_back(a_seen());
      b_squeeze.push_back(b_seen());
      both_squeeze.push_back(position);
    } else if (a_size == 1) {
      a_squeeze.push_back(a_seen());
      idx_b_other.push_back(position);
    } else if (b_size == 1) {
      b_squeeze.push_back(b_seen());
      idx_a_other.push_back(position);
    } else if (a_size == b_size) {
      a_batch.push_back(static_cast<int64_t>(idx_batch.size() + idx_a_other.size()));
      b_batch.push_back(static_cast<int64_t>(idx_batch.size() + idx_b_other.size()));
      idx_batch.push_back(position);
    } else {
      throw EngineError("matmul: Incompatible types for matmul arguments: " + operands +
                        " (batch dimensions must be equal or 1)");
    }
  }
  if (a_is_mat) idx_a_other.push_back(static_cast<int64_t>(num_batch));
  if (b_is_mat) idx_b_other.push_back(static_cast<int64_t>(num_batch) + (a_is_mat ? 1 : 0));
  std::vector<int64_t> output_positions = idx_batch;
  output_positions.insert(output_positions.end(), idx_a_other.begin(), idx_a_other.end());
  output_positions.insert(output_positions.end(), idx_b_other.begin(), idx_b_other.end());

  a = squeeze(a, a_squeeze);
  b = squeeze(b, b_squeeze);
  Array result =
      dot_general(a, b, {a.ndim() - 1}, {b.ndim() - 1 - (b_is_mat ? 1 : 0)}, a_batch, b_batch);
  result = transpose(result, argsort(output_positions));
  for (int64_t position : both_squeeze) result = expand_dims(result, position);
  return result;
}

}  // namespace pmap_engine
