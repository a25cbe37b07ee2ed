// How Flax derives a module's random key from a collection's root key (flax/core/scope.py,
// flax 0.12.8): Scope.push appends each child scope's name to a LazyRng suffix, Scope.make_rng
// appends the scope's call count for that collection (1 for the first call), and
// _fold_in_static folds the first 4 bytes of SHA-1(suffix), big-endian, into the root key (str
// items as UTF-8, ints as their minimal big-endian bytes; flax_fix_rng_separator is off by
// default, so no separators are hashed). Parameters ("params") and dropout masks ("dropout")
// both come from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parity {

// The word _fold_in_static folds in for the `count`-th make_rng call (1-based) of the module at
// `module_path` ({"Residual_0", "Dropout_0"}): jax.random.fold_in(root, this) is the key.
// (split_module_path of model_layers.h turns "Residual_0/Dropout_0" into that list.)
uint32_t flax_make_rng_data(const std::vector<std::string>& module_path, uint32_t count);

}  // namespace parity
