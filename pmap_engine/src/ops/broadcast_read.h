// Reading an operand as its broadcast to a larger shape without materialising the broadcast:
// element i of the broadcast is operand[offset(i)] under per-dimension element strides that are
// 0 along the broadcast dimensions. That is lax.broadcast_in_dim's semantics
// (jax/_src/lax/lax.py: broadcast_in_dim; ops/constants.cpp), and the size-1 dimensions lax's
// binary ops stretch (broadcasting_shape_rule). broadcast_in_dim's kernel reads its whole output
// this way, and loop fusion (runtime/loop_fusion.h) one block of it at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pmap_engine/array.h"

namespace pmap_engine {

class BroadcastRead {
 public:
  // strides[d]: the operand's element stride along dimension d of `shape` (0 where broadcast);
  // kernel_util.h's broadcast_strides gives them.
  BroadcastRead(const Shape& shape, const std::vector<int64_t>& strides) {
    // From the innermost dimension out: unit dimensions drop; a dimension whose stride
    // continues the one inside it (both 0, or contiguous) merges into it.
    for (size_t d = shape.size(); d-- > 0;) {
      if (shape[d] == 1) continue;
      if (!extents_.empty() && strides[d] == strides_.back() * extents_.back()) {
        extents_.back() *= shape[d];
      } else {
        extents_.push_back(shape[d]);
        strides_.push_back(strides[d]);
      }
    }
    if (extents_.empty()) {
      extents_.push_back(1);
      strides_.push_back(0);
    }
    std::reverse(extents_.begin(), extents_.end());
    std::reverse(strides_.begin(), strides_.end());
  }

  // out[0 .. count) = convert(element) for elements begin .. begin + count of the broadcast in
  // row-major order. It walks runs along the innermost merged dimension: a copy where the
  // operand is contiguous there, a fill where it is broadcast (BatchNorm's [C] -> [B, H, W, C]
  // is runs of C copied; LayerNorm's [B, T, 1] -> [B, T, D] runs of D filled).
  template <typename Source, typename Target, typename Convert>
  void read(const Source* operand, size_t begin, size_t count, Target* out, Convert convert) const {
    if (count == 0) return;
    const auto inner = static_cast<size_t>(extents_.back());
    const int64_t inner_stride = strides_.back();
    size_t row = begin / inner;
    size_t column = begin % inner;
    while (count > 0) {
      const Source* at = operand + row_offset(row);
      const size_t run = std::min(count, inner - column);
      if (inner_stride == 0) {
        std::fill(out, out + run, convert(at[0]));
      } else if (inner_stride == 1) {
        for (size_t i = 0; i < run; ++i) out[i] = convert(at[column + i]);
      } else {
        for (size_t i = 0; i < run; ++i) {
          out[i] = convert(at[static_cast<int64_t>(column + i) * inner_stride]);
        }
      }
      out += run;
      count -= run;
      column = 0;
      ++row;
    }
  }

 private:
  // The operand offset of the first element of row `row` of the innermost dimension.
  int64_t row_offset(size_t row) const {
    int64_t offset = 0;
    for (size_t d = extents_.size() - 1; d-- > 0;) {
      const auto extent = static_cast<size_t>(extents_[d]);
      offset += static_cast<int64_t>(row % extent) * strides_[d];
      row /= extent;
    }
    return offset;
  }

  std::vector<int64_t> extents_;  // the merged dimensions, outermost first
  std::vector<int64_t> strides_;
};

}  // namespace pmap_engine
