#include "parity/compare/tensor_diff.h"

namespace parity::compare {
namespace {

// How `mapped` came by the canonical name `name`: a rule's mapping, or the name kept as it is
// (no rule covered it, or it was canonical already).
interop::NameMapping mapping_of(const interop::CanonicalParams& mapped, const std::string& name) {
  for (const auto* list : {&mapped.mappings, &mapped.unmapped}) {
    for (const interop::NameMapping& mapping : *list) {
      if (mapping.canonical == name) return mapping;
    }
  }
  return {name, name, ""};
}

TensorGroupDiff diff_group(const std::string& group, const interop::CanonicalParams& a,
                           const interop::CanonicalParams& b, const std::string& path_a,
                           const std::string& path_b, double rtol, double atol) {
  TensorGroupDiff diff{group, interop::compare_param_names(a.tensors, b.tensors), {}};
  for (TensorDelta& delta : diff_tensor_sets(a.tensors, b.tensors, path_a, path_b, rtol, atol)) {
    const std::string& name = delta.name;
    diff.pairs.push_back(
        {mapping_of(a, name), mapping_of(b, name), a.tensors.at(name).shape, std::move(delta)});
  }
  return diff;
}

}  // namespace

size_t TensorFileDiff::num_matched() const {
  size_t count = 0;
  for (const TensorGroupDiff& group : groups) count += group.names.matched.size();
  return count;
}

size_t TensorFileDiff::num_unmatched() const {
  size_t count = 0;
  for (const TensorGroupDiff& group : groups) {
    count += group.names.only_in_a.size() + group.names.only_in_b.size() +
             group.names.shape_differs.size();
  }
  return count;
}

size_t TensorFileDiff::num_compared() const {
  size_t count = 0;
  for (const TensorGroupDiff& group : groups) count += group.pairs.size();
  return count;
}

size_t TensorFileDiff::num_outside() const {
  size_t count = 0;
  for (const TensorGroupDiff& group : groups) {
    for (const TensorPair& pair : group.pairs) count += pair.delta.within_tolerance ? 0 : 1;
  }
  return count;
}

TensorFileDiff diff_tensor_files(const MappedTensorFile& a, const MappedTensorFile& b,
                                 double rtol, double atol) {
  TensorFileDiff diff;
  diff.rtol = rtol;
  diff.atol = atol;
  for (const auto& [group, mapped_a] : a.groups) {
    const auto found = b.groups.find(group);
    if (found == b.groups.end()) {
      diff.groups_only_in_a.push_back(group);
      continue;
    }
    diff.groups.push_back(diff_group(group, mapped_a, found->second, a.path, b.path, rtol, atol));
  }
  for (const auto& entry : b.groups) {
    if (a.groups.count(entry.first) == 0) diff.groups_only_in_b.push_back(entry.first);
  }
  return diff;
}

}  // namespace parity::compare
