#include "pmap_engine/tree.h"

#include "core/python_repr.h"

namespace pmap_engine {

Tree::Tree(Array leaf) : kind_(Kind::kLeaf), leaf_(std::move(leaf)) {}

Tree Tree::tuple(std::vector<Tree> children) {
  Tree tree;
  tree.kind_ = Kind::kTuple;
  tree.children_ = std::move(children);
  return tree;
}

Tree Tree::dict(std::map<std::string, Tree> children) {
  Tree tree;
  tree.kind_ = Kind::kDict;
  tree.entries_ = std::move(children);
  return tree;
}

const Array& Tree::leaf() const {
  if (kind_ != Kind::kLeaf) {
    throw EngineError("expected an array, found a tree " + structure());
  }
  return leaf_;
}

const Tree& Tree::operator[](const std::string& key) const {
  if (kind_ != Kind::kDict) throw EngineError("tree " + structure() + " is not a dict; no '" + key + "'");
  auto found = entries_.find(key);
  if (found == entries_.end()) {
    throw EngineError("tree " + structure() + " has no key '" + key + "'");
  }
  return found->second;
}

const Tree& Tree::operator[](size_t index) const {
  if (kind_ != Kind::kTuple || index >= children_.size()) {
    throw EngineError("tree " + structure() + " has no element [" + std::to_string(index) + "]");
  }
  return children_[index];
}

void Tree::collect(std::vector<Array>& out) const {
  switch (kind_) {
    case Kind::kLeaf: out.push_back(leaf_); break;
    case Kind::kTuple: for (const auto& child : children_) child.collect(out); break;
    case Kind::kDict: for (const auto& [key, child] : entries_) child.collect(out); break;
    case Kind::kNone: break;
  }
}

std::vector<Array> Tree::leaves() const {
  std::vector<Array> out;
  collect(out);
  return out;
}

// Tuple positions are [i] in both path styles; `join_key` appends a dict key to the prefix.
void Tree::collect_paths(const std::string& prefix, const KeyJoin& join_key,
                         std::vector<std::string>& out) const {
  switch (kind_) {
    case Kind::kLeaf: out.push_back(prefix); break;
    case Kind::kTuple:
      for (size_t i = 0; i < children_.size(); ++i) {
        children_[i].collect_paths(prefix + "[" + std::to_string(i) + "]", join_key, out);
      }
      break;
    case Kind::kDict:
      for (const auto& [key, child] : entries_) {
        child.collect_paths(join_key(prefix, key), join_key, out);
      }
      break;
    case Kind::kNone: break;
  }
}

std::vector<std::string> Tree::leaf_paths(const std::string& separator) const {
  std::vector<std::string> out;
  collect_paths(
      "",
      [&separator](const std::string& prefix, const std::string& key) {
        return prefix.empty() ? key : prefix + separator + key;
      },
      out);
  return out;
}

std::vector<std::string> Tree::key_paths() const {
  std::vector<std::string> out;
  collect_paths(
      "",
      [](const std::string& prefix, const std::string& key) { return prefix + "['" + key + "']"; },
      out);
  return out;
}

std::string Tree::structure() const {
  const auto child_structure = [](const Tree& child) { return child.structure(); };
  switch (kind_) {
    case Kind::kLeaf: return "*";
    case Kind::kNone: return "None";
    case Kind::kTuple: return tuple_repr(children_, child_structure);
    case Kind::kDict: return dict_repr(entries_, child_structure);
  }
  return "";
}

Tree Tree::rebuild(const std::vector<Array>& leaves, size_t& next) const {
  switch (kind_) {
    case Kind::kLeaf: return Tree(leaves.at(next++));
    case Kind::kNone: return Tree();
    case Kind::kTuple: {
      std::vector<Tree> children;
      for (const auto& child : children_) children.push_back(child.rebuild(leaves, next));
      return tuple(std::move(children));
    }
    case Kind::kDict: {
      std::map<std::string, Tree> entries;
      for (const auto& [key, child] : entries_) entries.emplace(key, child.rebuild(leaves, next));
      return dict(std::move(entries));
    }
  }
  return Tree();
}

Tree Tree::unflatten(const std::vector<Array>& leaves) const {
  size_t next = 0;
  Tree out = rebuild(leaves, next);
  if (next != leaves.size()) {
    throw EngineError("unflatten: tree " + structure() + " has " + std::to_string(next) +
                      " leaves, got " + std::to_string(leaves.size()));
  }
  return out;
}

Tree tree_map(const std::function<Array(const Array&)>& fn, const Tree& tree) {
  std::vector<Array> mapped;
  for (const auto& leaf : tree.leaves()) mapped.push_back(fn(leaf));
  return tree.unflatten(mapped);
}

Tree tree_map(const std::function<Array(const Array&, const Array&)>& fn, const Tree& a,
              const Tree& b) {
  if (a.structure() != b.structure()) {
    throw EngineError("tree_map: trees have different structures " + a.structure() + " and " +
                      b.structure());
  }
  std::vector<Array> left = a.leaves();
  std::vector<Array> right = b.leaves();
  std::vector<Array> mapped;
  for (size_t i = 0; i < left.size(); ++i) mapped.push_back(fn(left[i], right[i]));
  return a.unflatten(mapped);
}

std::vector<Array> tree_leaves(const Tree& tree) { return tree.leaves(); }

}  // namespace pmap_engine
