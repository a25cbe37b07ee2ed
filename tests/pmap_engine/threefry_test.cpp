// Threefry-2x32 (20 rounds): one block against Random123's known answers, and JAX's vectorised
// threefry_2x32 (halves layout, odd-length padding) against its definition and JAX's tests.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "pmap_engine/random.h"

namespace pr = pmap_engine::random;

namespace {

struct KnownAnswer {
  pr::Key key;
  std::array<uint32_t, 2> counter;
  std::array<uint32_t, 2> expected;
};

// Random123's known answers for threefry2x32 with 20 rounds: Random123 tests/kat_vectors lines
// "threefry2x32 20 <counter0> <counter1> <key0> <key1> <out0> <out1>", also in Random123-Boost
// libs/random/test/test_threefry.cpp (DEShawResearch/Random123-Boost @ 65e3d87, lines 30-32) and
// in JAX's tests/random_test.py PrngTest.testThreefry2x32 (jax-ml/jax 0.11.1), which passes
// keypair first and the two counts second.
const KnownAnswer kRandom123Answers[] = {
    {{0x00000000, 0x00000000}, {0x00000000, 0x00000000}, {0x6b200159, 0x99ba4efe}},
    {{0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x1cb996fc, 0xbb002be7}},
    {{0x13198a2e, 0x03707344}, {0x243f6a88, 0x85a308d3}, {0xc4923a9c, 0x483df7a0}},
};

TEST(Threefry2x32, MatchesRandom123KnownAnswers) {
  for (const auto& answer : kRandom123Answers) {
    const auto words = pr::threefry2x32(answer.key, answer.counter);
    EXPECT_EQ(words[0], answer.expected[0]) << std::hex << "key " << answer.key.hi << " "
                                            << answer.key.lo;
    EXPECT_EQ(words[1], answer.expected[1]) << std::hex << "key " << answer.key.hi << " "
                                            << answer.key.lo;
  }
}

TEST(Threefry2x32, VectorisedTwoCountsIsOneBlock) {
  // tests/random_test.py testThreefry2x32: threefry_2x32(key, [c0, c1]) is the block [c0, c1].
  for (const auto& answer : kRandom123Answers) {
    const std::vector<uint32_t> counts = {answer.counter[0], answer.counter[1]};
    const std::vector<uint32_t> expected = {answer.expected[0], answer.expected[1]};
    EXPECT_EQ(pr::threefry_2x32(answer.key, counts), expected);
  }
}

TEST(Threefry2x32, VectorisedPairsFirstHalfWithSecondHalf) {
  // tests/random_test.py testThreefry2x32Large (n = 10,000,000 there; 1,001 here): n copies of
  // counter word 0 followed by n copies of counter word 1 hash to n copies of output word 0
  // followed by n copies of output word 1.
  const size_t n = 1001;
  std::vector<uint32_t> counts(n, 0x243f6a88);
  counts.resize(2 * n, 0x85a308d3);
  const std::vector<uint32_t> out = pr::threefry_2x32({0x13198a2e, 0x03707344}, counts);
  ASSERT_EQ(out.size(), 2 * n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], 0xc4923a9cu) << "index " << i;
    ASSERT_EQ(out[n + i], 0x483df7a0u) << "index " << n + i;
  }
}

TEST(Threefry2x32, VectorisedOddLengthPadsWithZero) {
  // threefry2x32.py threefry_2x32: an odd count array gets one 0 appended, is split into halves
  // x[0:h], x[h:2h], and the padding's output slot is dropped. For [a, b, c]: blocks [a, c] and
  // [b, 0]; output [H(a,c)[0], H(b,0)[0], H(a,c)[1]].
  const pr::Key key{0x13198a2e, 0x03707344};
  const uint32_t a = 7, b = 11, c = 13;
  const auto block_ac = pr::threefry2x32(key, {a, c});
  const auto block_b0 = pr::threefry2x32(key, {b, 0});
  const std::vector<uint32_t> expected = {block_ac[0], block_b0[0], block_ac[1]};
  EXPECT_EQ(pr::threefry_2x32(key, {a, b, c}), expected);

  const auto block_a0 = pr::threefry2x32(key, {a, 0});
  EXPECT_EQ(pr::threefry_2x32(key, {a}), std::vector<uint32_t>{block_a0[0]});
}

TEST(Threefry2x32, VectorisedEmptyIsEmpty) {
  // tests/random_test.py testThreefry2x32Empty: an empty count array hashes to an empty array.
  EXPECT_TRUE(pr::threefry_2x32({0x13198a2e, 0x03707344}, {}).empty());
}

TEST(Threefry2x32, EveryWordMatters) {
  // Flipping any one bit of key or counter changes the output (a smoke check that all four
  // input words reach the rounds).
  const pr::Key key{0x01234567, 0x89abcdef};
  const std::array<uint32_t, 2> counter = {0xdeadbeef, 0x0badf00d};
  const auto base = pr::threefry2x32(key, counter);
  for (uint32_t bit = 0; bit < 32; ++bit) {
    const uint32_t flip = 1u << bit;
    EXPECT_NE(pr::threefry2x32({key.hi ^ flip, key.lo}, counter), base) << "key.hi bit " << bit;
    EXPECT_NE(pr::threefry2x32({key.hi, key.lo ^ flip}, counter), base) << "key.lo bit " << bit;
    EXPECT_NE(pr::threefry2x32(key, {counter[0] ^ flip, counter[1]}), base) << "c0 bit " << bit;
    EXPECT_NE(pr::threefry2x32(key, {counter[0], counter[1] ^ flip}), base) << "c1 bit " << bit;
  }
}

}  // namespace
