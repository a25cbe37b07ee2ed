// Python's repr of a tuple and of a dict whose items are already text: "(a, b)", "(a,)" for
// one item, "{'k': v, ...}". A tree's structure (Tree::structure) and an in_axes spec that must
// be a prefix of it (AxisSpec::to_string) are printed through it, so that an error naming both
// writes them alike.
#pragma once

#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace pmap_engine {

// `text(child)` gives each child's own repr.
template <typename Child, typename Text>
std::string tuple_repr(const std::vector<Child>& children, const Text& text) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < children.size(); ++i) out << (i ? ", " : "") << text(children[i]);
  out << (children.size() == 1 ? ",)" : ")");
  return out.str();
}

// Keys in the map's order (sorted, as JAX flattens a dict).
template <typename Child, typename Text>
std::string dict_repr(const std::map<std::string, Child>& entries, const Text& text) {
  std::ostringstream out;
  out << "{";
  bool first = true;
  for (const auto& [key, child] : entries) {
    out << (first ? "" : ", ") << "'" << key << "': " << text(child);
    first = false;
  }
  out << "}";
  return out.str();
}

}  // namespace pmap_engine
