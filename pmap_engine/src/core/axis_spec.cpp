#include "pmap_engine/axis_spec.h"

#include "core/python_repr.h"

namespace pmap_engine {

AxisSpec AxisSpec::tuple(std::vector<AxisSpec> children) {
  AxisSpec spec;
  spec.kind_ = Kind::kTuple;
  spec.children_ = std::move(children);
  return spec;
}

AxisSpec AxisSpec::dict(std::map<std::string, AxisSpec> children) {
  AxisSpec spec;
  spec.kind_ = Kind::kDict;
  spec.entries_ = std::move(children);
  return spec;
}

void AxisSpec::broadcast(const Tree& value, std::vector<std::optional<int64_t>>& out,
                         bool& ok) const {
  switch (kind_) {
    case Kind::kLeaf:
      out.insert(out.end(), value.leaves().size(), axis_);
      return;
    case Kind::kTuple:
      if (value.kind() != Tree::Kind::kTuple || value.children().size() != children_.size()) {
        ok = false;
        return;
      }
      for (size_t c = 0; c < children_.size(); ++c)
        children_[c].broadcast(value.children()[c], out, ok);
      return;
    case Kind::kDict:
      if (value.kind() != Tree::Kind::kDict || value.entries().size() != entries_.size()) {
        ok = false;
        return;
      }
      for (const auto& [key, child] : value.entries()) {
        auto found = entries_.find(key);
        if (found == entries_.end()) {
          ok = false;
          return;
        }
        found->second.broadcast(child, out, ok);
      }
      return;
  }
}

std::vector<std::optional<int64_t>> AxisSpec::broadcast_over(const Tree& value,
                                                             const std::string& what) const {
  std::vector<std::optional<int64_t>> axes;
  bool ok = true;
  broadcast(value, axes, ok);
  if (!ok) {
    throw EngineError(what +
                      " specification must be a tree prefix of the corresponding value, "
                      "got specification " +
                      to_string() + " for value tree " + value.structure() +
                      ". Give one entry per positional argument, and for a "
                      "pytree argument either one axis for all its leaves or a tuple/dict of "
                      "the same structure");
  }
  return axes;
}

std::string AxisSpec::to_string() const {
  const auto child_text = [](const AxisSpec& child) { return child.to_string(); };
  switch (kind_) {
    case Kind::kLeaf: return axis_ ? std::to_string(*axis_) : "None";
    case Kind::kTuple: return tuple_repr(children_, child_text);
    case Kind::kDict: return dict_repr(entries_, child_text);
  }
  return "";
}

}  // namespace pmap_engine
