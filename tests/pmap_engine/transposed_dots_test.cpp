// transpose(dot(a, b)) -> dot(b, a) (pmap_engine/src/runtime/transposed_dots.h), as
// runtime::compile runs it: the gradient of x @ W with respect to W traces a dot_general and a
// transpose (JAX's _dot_general_transpose_rhs); the compiled program computes it as one
// dot_general with its operands swapped, bit for bit what the transposed copy held (the
// reference runs op by op, each primitive's kernel alone).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"
#include "engine_test_util.h"
#include "runtime/compile.h"
#include "runtime/program_cache.h"

namespace pmap_engine {
namespace {

int count_primitive(const ir::Program& program, const std::string& name) {
  int count = 0;
  for (const ir::Equation& equation : program.equations) count += equation.primitive->name == name;
  return count;
}

// loss(W) = sum(tanh(x @ W)) for x [batch, in], W [in, out]: odd sizes, and the mlp2-fmnist
// step's first layer (512 x 784 @ 784 x 256), where OpenBLAS packs and blocks the product.
class TransposedDots : public ::testing::TestWithParam<std::array<int64_t, 3>> {};

TEST_P(TransposedDots, TheWeightGradientIsOneProductWithoutATransposedCopy) {
  const auto [batch, in, out] = GetParam();
  const TreeFunction loss = [](const std::vector<Tree>& args) {
    return Tree(sum(tanh(matmul(args[1].leaf(), args[0].leaf()))));
  };
  const TreeFunction step = value_and_grad(loss);
  const Array w = testing::normal_array({in, out}, 1);
  const Array x = testing::normal_array({batch, in}, 2);

  const runtime::TracedFunction traced = runtime::trace_function(
      step, {Tree(w), Tree(x)}, {}, [](size_t, size_t, const Array& leaf) { return leaf.shape(); },
      "test");
  ASSERT_EQ(count_primitive(traced.program, "transpose"), 1);
  const auto executable = runtime::compile(traced.program);
  EXPECT_EQ(executable->folded_transposes, 1);
  EXPECT_EQ(count_primitive(executable->program, "transpose"), 0);

  const std::vector<Array> compiled = jit(step)({Tree(w), Tree(x)}).leaves();
  const std::vector<Array> reference = testing::op_by_op(step, {Tree(w), Tree(x)}).leaves();
  ASSERT_EQ(compiled.size(), 2u);
  // The loss reads the forward product, which the rewrite leaves alone: the same bits.
  testing::expect_same_bits(Tree(compiled[0]), Tree(reference[0]));
  // dW[i, j] = sum_b x[b, i] (1 - tanh(x @ W)[b, j]^2): each term's magnitude is at most
  // |x[b, i]|, so x's column sum of magnitudes bounds the element's sum of |terms| for every j.
  const std::vector<double> columns = testing::column_magnitudes(x);
  std::vector<double> magnitudes;
  for (int64_t i = 0; i < in; ++i) {
    magnitudes.insert(magnitudes.end(), static_cast<size_t>(out), columns[static_cast<size_t>(i)]);
  }
  testing::expect_within_summation_bound(compiled[1], reference[1], magnitudes, batch);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TransposedDots,
                         ::testing::Values(std::array<int64_t, 3>{37, 53, 29},
                                           std::array<int64_t, 3>{512, 784, 256}));

}  // namespace
}  // namespace pmap_engine
