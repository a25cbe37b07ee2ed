// Threefry-2x32, the hash under every jax.random function.
//
// Vocabulary (as in random.h):
//   key words      ks[0] = key.hi, ks[1] = key.lo, and a third word ks[2] = ks[0] ^ ks[1] ^
//                  0x1BD11BDA (the Threefish key-schedule parity constant).
//   counter words  x[0], x[1]: the two words being hashed; they become the output.
//   round          x[0] += x[1]; x[1] = rotl(x[1], r); x[1] ^= x[0], with r from a rotation set.
//   injection      after every 4 rounds, add the key words back in a rotating order plus the
//                  injection number: x[0] += ks[s % 3]; x[1] += ks[(s + 1) % 3] + s, s = 1..5.
// A block is: inject ks[0], ks[1] (number 0, no constant), then 5 groups of 4 rounds, each
// followed by an injection; groups alternate between rotation sets {13, 15, 26, 6} and
// {17, 29, 16, 24}. 20 rounds in all, as Random123's threefry2x32 default and JAX's
// _threefry2x32_lowering (jax/_src/random/threefry2x32.py) compute it.
//
// Vectorised form (JAX's threefry_2x32 in the same file): a flat count array of length n is
// padded to even length with one 0, cut into halves of length half = ceil(n / 2), and block j
// hashes the counter [counts[j], counts[half + j]]. The output is word 0 of blocks 0..half-1
// followed by word 1 of blocks 0..half-1, with the padding's slot dropped. Example, n = 3,
// counts [a, b, c]: blocks hash [a, c] and [b, 0]; output [H(a,c)[0], H(b,0)[0], H(a,c)[1]].
#include "pmap_engine/random.h"

namespace pmap_engine::random {
namespace {

constexpr uint32_t kKeyScheduleParity = 0x1BD11BDA;
constexpr std::array<std::array<uint32_t, 4>, 2> kRotations = {{{13, 15, 26, 6}, {17, 29, 16, 24}}};

inline uint32_t rotate_left(uint32_t value, uint32_t bits) {
  return (value << bits) | (value >> (32 - bits));
}

}  // namespace

std::array<uint32_t, 2> threefry2x32(Key key, std::array<uint32_t, 2> counter) {
  const std::array<uint32_t, 3> ks = {key.hi, key.lo, key.hi ^ key.lo ^ kKeyScheduleParity};
  std::array<uint32_t, 2> x = {counter[0] + ks[0], counter[1] + ks[1]};
  for (uint32_t group = 0; group < 5; ++group) {
    for (uint32_t rotation : kRotations[group % 2]) {
      x[0] += x[1];
      x[1] = rotate_left(x[1], rotation);
      x[1] ^= x[0];
    }
    const uint32_t injection = group + 1;
    x[0] += ks[injection % 3];
    x[1] += ks[(injection + 1) % 3] + injection;
  }
  return x;
}

std::vector<uint32_t> threefry_2x32(Key key, const std::vector<uint32_t>& counts) {
  const size_t num_counts = counts.size();
  const size_t half = (num_counts + 1) / 2;
  std::vector<uint32_t> out(num_counts);
  for (size_t j = 0; j < half; ++j) {
    const bool padded = half + j >= num_counts;
    const auto words = threefry2x32(key, {counts[j], padded ? 0u : counts[half + j]});
    out[j] = words[0];
    if (!padded) out[half + j] = words[1];
  }
  return out;
}

}  // namespace pmap_engine::random
