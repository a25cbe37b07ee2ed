// Helpers shared by the tests of the host PRNG (prng_test.cpp) and of the random ops on arrays
// (random_ops_test.cpp). Depends only on pmap_engine_random.
#pragma once

#include <cstdint>
#include <vector>

#include "pmap_engine/random.h"

namespace pmap_engine::testing {

// Keys flattened to their u32 words, each key hi then lo: [hi0, lo0, hi1, lo1, ...], the
// row-major data of JAX's u32[n, 2] key array.
inline std::vector<uint32_t> key_words(const std::vector<random::Key>& keys) {
  std::vector<uint32_t> words;
  for (const auto& key : keys) {
    words.push_back(key.hi);
    words.push_back(key.lo);
  }
  return words;
}

}  // namespace pmap_engine::testing
