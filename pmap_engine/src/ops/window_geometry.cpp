#include "ops/window_geometry.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "ops/kernel_util.h"

namespace pmap_engine {

int64_t dilate_dim(int64_t size, int64_t dilation) {
  return size == 0 ? 0 : 1 + dilation * (size - 1);
}

int64_t stride_dim(int64_t size, int64_t window, int64_t stride) {
  return size < window ? 0 : (size - window) / stride + 1;
}

int64_t WindowDim::output_size() const {
  return stride_dim(dilate_dim(size, base_dilation) + padding.first + padding.second,
                    dilate_dim(window, window_dilation), stride);
}

std::vector<int64_t> WindowDim::taps() const {
  const int64_t num_out = output_size();
  const int64_t dilated_size = dilate_dim(size, base_dilation);
  std::vector<int64_t> indices(static_cast<size_t>(num_out * window), -1);
  for (int64_t out = 0; out < num_out; ++out) {
    for (int64_t tap = 0; tap < window; ++tap) {
      // The position in the dilated, unpadded input.
      const int64_t position = out * stride + tap * window_dilation - padding.first;
      if (position < 0 || position >= dilated_size || position % base_dilation != 0) continue;
      indices[static_cast<size_t>(out * window + tap)] = position / base_dilation;
    }
  }
  return indices;
}

std::vector<int64_t> WindowDim::targets() const {
  const std::vector<int64_t> read = taps();
  std::vector<int64_t> targets(static_cast<size_t>(size * window), -1);
  for (size_t slot = 0; slot < read.size(); ++slot) {
    const int64_t in = read[slot];
    if (in < 0) continue;
    const int64_t out = static_cast<int64_t>(slot) / window,
                  tap = static_cast<int64_t>(slot) % window;
    targets[static_cast<size_t>(in * window + tap)] = out;
  }
  return targets;
}

namespace {

// The dilated in, window and out sizes of dimension `d`.
struct DilatedSizes {
  int64_t lhs, rhs, out;
};
DilatedSizes dilated_sizes(size_t d, const std::vector<int64_t>& in_shape,
                           const std::vector<int64_t>& window_dimensions,
                           const std::vector<int64_t>& window_strides,
                           const std::vector<int64_t>& out_shape,
                           const std::vector<int64_t>& lhs_dilation,
                           const std::vector<int64_t>& rhs_dilation) {
  return {dilate_dim(in_shape[d], lhs_dilation[d]),
          dilate_dim(window_dimensions[d], rhs_dilation[d]),
          dilate_dim(out_shape[d], window_strides[d])};
}

}  // namespace

std::vector<PadPair> pad_pairs_from_flat(const std::vector<int64_t>& flat) {
  std::vector<PadPair> pairs;
  for (size_t i = 0; i + 1 < flat.size(); i += 2) pairs.emplace_back(flat[i], flat[i + 1]);
  return pairs;
}

std::vector<PadPair> conv_general_vjp_lhs_padding(const std::vector<int64_t>& in_shape,
                                                  const std::vector<int64_t>& window_dimensions,
                                                  const std::vector<int64_t>& window_strides,
                                                  const std::vector<int64_t>& out_shape,
                                                  const std::vector<PadPair>& padding,
                                                  const std::vector<int64_t>& lhs_dilation,
                                                  const std::vector<int64_t>& rhs_dilation) {
  std::vector<PadPair> pads;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    const DilatedSizes s = dilated_sizes(d, in_shape, window_dimensions, window_strides, out_shape,
                                         lhs_dilation, rhs_dilation);
    const int64_t before = s.rhs - padding[d].first - 1;
    const int64_t after = s.lhs + s.rhs - 1 - s.out - before;
    pads.emplace_back(before, after);
  }
  return pads;
}

// lax.padtype_to_pads (jax/_src/lax/lax.py): "SAME" pads so that out = ceil(in / stride), the
// odd one of an odd total on the high side; "SAME_LOWER" on the low side; "VALID" pads nothing.
std::vector<PadPair> padtype_to_pads(const std::vector<int64_t>& in_shape,
                                     const std::vector<int64_t>& window_shape,
                                     const std::vector<int64_t>& window_strides,
                                     const std::string& padding) {
  if (in_shape.size() != window_shape.size() || in_shape.size() != window_strides.size()) {
    throw EngineError("padtype_to_pads: in_shape " + tuple_to_string(in_shape) + ", window_shape " +
                      tuple_to_string(window_shape) + " and window_strides " +
                      tuple_to_string(window_strides) + " must have the same length");
  }
  std::string upper = padding;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper == "VALID") return std::vector<PadPair>(in_shape.size(), {0, 0});
  if (upper != "SAME" && upper != "SAME_LOWER") {
    throw EngineError(
        "padtype_to_pads: Unrecognized padding type: expected 'VALID', 'SAME', or "
        "'SAME_LOWER', got " +
        padding + ".");
  }
  std::vector<PadPair> pads;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (window_strides[d] < 1) {
      throw EngineError("padtype_to_pads: window_strides must be positive, got " +
                        tuple_to_string(window_strides));
    }
    const int64_t out = (in_shape[d] + window_strides[d] - 1) / window_strides[d];
    const int64_t total =
        std::max<int64_t>((out - 1) * window_strides[d] + window_shape[d] - in_shape[d], 0);
    const int64_t half = total / 2;
    pads.push_back(upper == "SAME" ? PadPair{half, total - half} : PadPair{total - half, half});
  }
  return pads;
}

std::vector<PadPair> resolve_padding(const char* op, const Padding& padding,
                                     const std::vector<int64_t>& in_shape,
                                     const std::vector<int64_t>& window_shape,
                                     const std::vector<int64_t>& window_strides) {
  if (!padding.name.empty()) {
    return padtype_to_pads(in_shape, window_shape, window_strides, padding.name);
  }
  if (padding.pairs.size() != in_shape.size()) {
    throw EngineError(std::string(op) + ": padding needs one (lo, hi) pair per dimension (" +
                      std::to_string(in_shape.size()) + "), got " +
                      std::to_string(padding.pairs.size()) + " pairs");
  }
  return padding.pairs;
}

}  // namespace pmap_engine
