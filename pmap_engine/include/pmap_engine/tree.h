// Tree: a pytree of arrays. Nested tuples/lists and string-keyed dicts (kept sorted by key,
// as JAX sorts dict keys when it flattens) with arrays at the leaves. Leaves flatten in a
// stable order, and every leaf has a path ("dense0.kernel", "[1].mu") for messages.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pmap_engine/array.h"

namespace pmap_engine {

class Tree {
 public:
  enum class Kind { kLeaf, kTuple, kDict, kNone };

  Tree() : kind_(Kind::kNone) {}
  Tree(Array leaf);  // NOLINT: an array is a one-leaf tree
  static Tree tuple(std::vector<Tree> children);
  static Tree dict(std::map<std::string, Tree> children);

  Kind kind() const { return kind_; }
  bool is_leaf() const { return kind_ == Kind::kLeaf; }
  const Array& leaf() const;
  const std::vector<Tree>& children() const { return children_; }  // tuple children
  const std::map<std::string, Tree>& entries() const { return entries_; }  // dict children

  // Dict lookup and tuple indexing, with an error that lists what exists.
  const Tree& operator[](const std::string& key) const;
  const Tree& operator[](size_t index) const;
  // Implicit use of a leaf as an array: p["w1"] in an expression.
  operator const Array&() const { return leaf(); }  // NOLINT

  std::vector<Array> leaves() const;
  // Dict keys joined with `separator` ("dense0.kernel"; "Conv_0/kernel" with "/", as
  // jax.tree_util.keystr(path, simple=True, separator="/") writes Flax's names).
  std::vector<std::string> leaf_paths(const std::string& separator = ".") const;
  // Each leaf's key path as jax.tree_util.keystr writes it: "[1]" for a tuple entry, "['w']"
  // for a dict entry, "" for a lone array (jax/_src/tree_util.py keystr; JAX's error texts
  // name a leaf "args[0]['dense0']['bias']" with it, linear_util._clean_keystr_arg_names).
  std::vector<std::string> key_paths() const;
  // The structure without the leaves: "{'b': *, 'w': *}", "(*, (*, *))".
  std::string structure() const;
  // A tree of the same structure with `leaves` in flatten order.
  Tree unflatten(const std::vector<Array>& leaves) const;

 private:
  void collect(std::vector<Array>& out) const;
  using KeyJoin = std::function<std::string(const std::string& prefix, const std::string& key)>;
  void collect_paths(const std::string& prefix, const KeyJoin& join_key,
                     std::vector<std::string>& out) const;
  Tree rebuild(const std::vector<Array>& leaves, size_t& next) const;

  Kind kind_;
  Array leaf_;
  std::vector<Tree> children_;
  std::map<std::string, Tree> entries_;
};

Tree tree_map(const std::function<Array(const Array&)>& fn, const Tree& tree);
Tree tree_map(const std::function<Array(const Array&, const Array&)>& fn, const Tree& a,
              const Tree& b);
std::vector<Array> tree_leaves(const Tree& tree);

}  // namespace pmap_engine
