// transpose(dot(a, b)) -> dot(b, a) (pmap_engine/src/runtime/transposed_dots.h), as
// runtime::compile runs it: the gradient of x @ W with respect to W traces a dot_general and a
// transpose (JAX's _dot_general_transpose_rhs); the compiled program computes it as one
// dot_general with its operands swapped, bit for bit what the transposed copy held (the
// reference runs op by op, each primitive's kernel alone).
#include <gtest/gtest.h>

#include <array>
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

  testing::expect_same_bits(jit(step)({Tree(w), Tree(x)}),
                            testing::op_by_op(step, {Tree(w), Tree(x)}));
}

INSTANTIATE_TEST_SUITE_P(Shapes, TransposedDots,
                         ::testing::Values(std::array<int64_t, 3>{37, 53, 29},
                                           std::array<int64_t, 3>{512, 784, 256}));

}  // namespace
}  // namespace pmap_engine
