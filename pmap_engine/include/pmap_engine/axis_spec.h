// AxisSpec: one value of pmap's in_axes / out_axes. An axis (negative counts from the end),
// None, or a tuple/dict of AxisSpecs that is a tree prefix of the value it describes, as in
// jax.pmap(f, in_axes=(None, {'x': 0, 'y': 1})): each spec leaf applies to every array leaf
// below the matching place of the value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pmap_engine/tree.h"

namespace pmap_engine {

class AxisSpec {
 public:
  AxisSpec(int axis) : axis_(axis) {}                     // NOLINT: in_axes=0
  AxisSpec(int64_t axis) : axis_(axis) {}                 // NOLINT
  AxisSpec(std::nullopt_t) {}                             // NOLINT: in_axes=None
  AxisSpec(std::optional<int64_t> axis) : axis_(axis) {}  // NOLINT
  static AxisSpec tuple(std::vector<AxisSpec> children);
  static AxisSpec dict(std::map<std::string, AxisSpec> children);

  // The axis of every array leaf of `value`, this spec broadcast over it as a tree prefix.
  // A spec that is not a prefix raises JAX's error ("<what> specification must be a tree
  // prefix of the corresponding value", jax/_src/api_util.py flatten_axes), naming both trees.
  std::vector<std::optional<int64_t>> broadcast_over(const Tree& value,
                                                     const std::string& what) const;
  // "0", "None", "(None, 0)", "{'x': 0}".
  std::string to_string() const;

 private:
  enum class Kind { kLeaf, kTuple, kDict };
  AxisSpec() = default;
  void broadcast(const Tree& value, std::vector<std::optional<int64_t>>& out, bool& ok) const;

  Kind kind_ = Kind::kLeaf;
  std::optional<int64_t> axis_;
  std::vector<AxisSpec> children_;
  std::map<std::string, AxisSpec> entries_;
};

}  // namespace pmap_engine
