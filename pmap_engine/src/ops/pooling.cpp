// flax.linen's max_pool and avg_pool on the windowed reductions (google/flax commit 18f8f31,
// flax/linen/pooling.py: pool, max_pool, avg_pool).
//
// x is [B..., H, W, C] (any number of leading batch dimensions, or none): the window and the
// strides cover the spatial dimensions, and every batch dimension and the features get a
// window and stride of 1 and no padding, as flax's `pool` builds them for lax.reduce_window.
#include <string>
#include <vector>

#include "ops/broadcasting.h"
#include "ops/kernel_util.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

// The full-rank arguments of lax.reduce_window that flax.linen.pool passes.
struct PoolWindow {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  Padding padding;
};

PoolWindow pool_window(const char* op, const Array& x, const std::vector<int64_t>& window_shape,
                       std::vector<int64_t> strides, const Padding& padding) {
  check_valid_operand(op, x);
  const size_t spatial = window_shape.size();
  if (strides.empty()) strides.assign(spatial, 1);
  if (strides.size() != spatial || x.shape().size() < spatial + 1) {
    throw EngineError(std::string(op) + ": window_shape " + tuple_to_string(window_shape) +
                      " and strides " + tuple_to_string(strides) +
                      " must have one entry per spatial dimension of the input " +
                      type_to_string(x.dtype(), x.shape()) + " ([B..., spatial..., C])");
  }
  const size_t num_batch = x.shape().size() - spatial - 1;
  PoolWindow window{std::vector<int64_t>(num_batch, 1), std::vector<int64_t>(num_batch, 1),
                    padding};
  window.dims.insert(window.dims.end(), window_shape.begin(), window_shape.end());
  window.strides.insert(window.strides.end(), strides.begin(), strides.end());
  window.dims.push_back(1);
  window.strides.push_back(1);
  if (padding.name.empty()) {
    if (padding.pairs.size() != spatial) {
      throw EngineError(std::string(op) + ": padding needs one (lo, hi) pair per spatial " +
                        "dimension (" + std::to_string(spatial) + "), got " +
                        std::to_string(padding.pairs.size()));
    }
    std::vector<PadPair> pairs(num_batch, {0, 0});
    pairs.insert(pairs.end(), padding.pairs.begin(), padding.pairs.end());
    pairs.emplace_back(0, 0);
    window.padding = Padding(pairs);
  }
  return window;
}

}  // namespace

// flax: pool(inputs, -jnp.inf, lax.max, ...).
Array max_pool(const Array& x, const std::vector<int64_t>& window_shape,
               const std::vector<int64_t>& strides, const Padding& padding) {
  const PoolWindow w = pool_window("max_pool", x, window_shape, strides, padding);
  return reduce_window_max(x, w.dims, w.strides, w.padding);
}

// flax: the window sums divided by np.prod(window_shape) when count_include_pad, else by the
// window sums of ones of shape (1, H, W, 1) (inputs.shape[:-1] + (1,) with the batch
// dimension made 1), the number of input elements in each window, broadcast.
Array avg_pool(const Array& x, const std::vector<int64_t>& window_shape,
               const std::vector<int64_t>& strides, const Padding& padding,
               bool count_include_pad) {
  const PoolWindow w = pool_window("avg_pool", x, window_shape, strides, padding);
  const Array sums = reduce_window_sum(x, w.dims, w.strides, w.padding);
  if (count_include_pad) {
    return sums / static_cast<double>(shape_num_elements(window_shape));
  }
  Shape ones_shape = x.shape();
  ones_shape.back() = 1;
  if (ones_shape.size() == window_shape.size() + 2) ones_shape.front() = 1;
  return sums / reduce_window_sum(ones(ones_shape, x.dtype()), w.dims, w.strides, w.padding);
}

}  // namespace pmap_engine
