// The engine's core: pytrees, tracing errors, jit's cache, program printing, op-by-op mode,
// donation, and value_and_grad as a program transformation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;

JitOptions static_args(std::set<size_t> argnums) {
  JitOptions options;
  options.static_argnums = std::move(argnums);
  return options;
}

JitOptions donated_args(std::set<size_t> argnums) {
  JitOptions options;
  options.donate_argnums = std::move(argnums);
  return options;
}

Tree params_tree() {
  return Tree::dict({{"w", Array::from_floats({2, 2}, {1, 2, 3, 4})},
                     {"b", Array::from_floats({2}, {0.5f, -0.5f})}});
}

TEST(Tree, FlattensDictsInSortedKeyOrderWithPaths) {
  Tree tree = Tree::tuple({params_tree(), Array::scalar(3)});
  EXPECT_EQ(tree.structure(), "({'b': *, 'w': *}, *)");
  EXPECT_EQ(tree.leaf_paths(), (std::vector<std::string>{"[0].b", "[0].w", "[1]"}));
  std::vector<Array> leaves = tree.leaves();
  ASSERT_EQ(leaves.size(), 3u);
  EXPECT_EQ(leaves[0].shape(), (Shape{2}));
  Tree rebuilt = tree.unflatten(leaves);
  EXPECT_EQ(rebuilt.structure(), tree.structure());
  EXPECT_THAT([&] { (void)tree[0]["x"]; }, ::testing::Throws<EngineError>());
}

TEST(Tree, TreeMapAppliesToEveryLeaf) {
  Tree doubled = tree_map([](const Array& x) { return x * 2.0; }, params_tree());
  EXPECT_EQ(doubled["w"].leaf().to_floats(), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(doubled["b"].leaf().to_floats(), (std::vector<float>{1, -1}));
}

TEST(Jit, TracesOncePerSignatureAndCountsHitsAndMisses) {
  Jitted f = jit([](const std::vector<Tree>& args) { return Tree(args[0].leaf() * 3.0 + 1.0); });
  Tree out = f({Array::from_floats({3}, {1, 2, 3})});
  EXPECT_EQ(out.leaf().to_floats(), (std::vector<float>{4, 7, 10}));
  f({Array::from_floats({3}, {0, 0, 0})});
  EXPECT_EQ(f.cache_stats().misses, 1);
  EXPECT_EQ(f.cache_stats().hits, 1);
  // A new shape is a new signature: the function is traced again (pitfall P14).
  f({Array::from_floats({4}, {0, 0, 0, 0})});
  EXPECT_EQ(f.cache_stats().misses, 2);
}

TEST(Jit, StaticArgumentsAreConcreteAndPartOfTheSignature) {
  Jitted f = jit(
      [](const std::vector<Tree>& args) {
        const bool negate = args[1].leaf().item() != 0;  // allowed: argument 1 is static
        return Tree(negate ? -args[0].leaf() : args[0].leaf());
      },
      static_args({1}));
  Array x = Array::from_floats({2}, {1, -2});
  EXPECT_EQ(f({x, Array::scalar(1)}).leaf().to_floats(), (std::vector<float>{-1, 2}));
  EXPECT_EQ(f({x, Array::scalar(0)}).leaf().to_floats(), (std::vector<float>{1, -2}));
  EXPECT_EQ(f.cache_stats().misses, 2);
}

TEST(Jit, UsingATracedValueAsConcreteExplainsTracing) {
  Jitted f = jit([](const std::vector<Tree>& args) {
    if (args[0].leaf().item() > 0) return Tree(args[0].leaf());
    return Tree(-args[0].leaf());
  });
  try {
    f({Array::scalar(1.0)});
    FAIL() << "expected an error";
  } catch (const EngineError& error) {
    EXPECT_THAT(error.what(), HasSubstr("Abstract tracer value encountered"));
    EXPECT_THAT(error.what(), HasSubstr("item() needs the value of a traced array f32[]"));
    EXPECT_THAT(error.what(), HasSubstr("debug_print"));
    EXPECT_THAT(error.what(), HasSubstr("static_argnums"));
  }
}

TEST(Jit, DisableJitRunsOpByOpSoConcreteBranchesWork) {
  Jitted f = jit([](const std::vector<Tree>& args) {
    return Tree(args[0].leaf().item() > 0 ? args[0].leaf() : -args[0].leaf());
  });
  DisableJit op_by_op;
  EXPECT_EQ(f({Array::scalar(-2.0)}).leaf().item(), 2.0);
  EXPECT_EQ(f.cache_stats().misses, 0);
}

TEST(Program, PrintsOneEquationPerLineWithTypes) {
  std::string text = make_program(
      [](const std::vector<Tree>& args) {
        return Tree(sum(tanh(matmul(args[0].leaf(), args[1].leaf()))));
      },
      {Array::from_floats({2, 3}, std::vector<float>(6, 1)),
       Array::from_floats({3, 4}, std::vector<float>(12, 1))});
  EXPECT_THAT(text, HasSubstr("{ lambda ; a:f32[2,3] b:f32[3,4]. let"));
  EXPECT_THAT(text, HasSubstr("c:f32[2,4] = dot_general"));
  EXPECT_THAT(text, HasSubstr("d:f32[2,4] = tanh c"));
  EXPECT_THAT(text, HasSubstr("e:f32[] = reduce_sum[axes=(0, 1)] d"));
  EXPECT_THAT(text, HasSubstr("in (e,) }"));
}

TEST(Jit, DonatedArgumentsAreUpdatedInPlaceAndDeleted) {
  Jitted step = jit([](const std::vector<Tree>& args) { return Tree(args[0].leaf() - 1.0); },
                    donated_args({0}));
  Array x = Array::from_floats({1024}, std::vector<float>(1024, 5));
  Tree y = step({x});
  EXPECT_EQ(y.leaf().to_floats()[0], 4.0f);
  EXPECT_TRUE(x.is_deleted());
  EXPECT_THAT([&] { x.to_floats(); }, ::testing::Throws<EngineError>());
  EXPECT_EQ(step.last_execution().donated_reuses, 1);
  // The result is written over the donated input, so only it and the 4-byte literal 1.0 live.
  EXPECT_EQ(step.last_execution().peak_bytes, 1024 * 4 + 4);
}

TEST(Jit, WithoutDonationInputAndResultLiveTogether) {
  Jitted step = jit([](const std::vector<Tree>& args) { return Tree(args[0].leaf() - 1.0); });
  Array x = Array::from_floats({1024}, std::vector<float>(1024, 5));
  step({x});
  EXPECT_FALSE(x.is_deleted());
  EXPECT_EQ(x.to_floats()[0], 5.0f);
  EXPECT_EQ(step.last_execution().donated_reuses, 0);
  EXPECT_EQ(step.last_execution().peak_bytes, 2 * 1024 * 4 + 4);
}

// t = x * 2 dies in the sum; no later result has its size, so its storage is freed, not kept
// for reuse: while the [2048] broadcast is live the device holds only live buffers.
TEST(Jit, StorageNoLaterResultCanUseIsFreedNotKept) {
  Jitted step = jit([](const std::vector<Tree>& args) {
    const Array total = sum(args[0].leaf() * 2.0);
    return Tree(broadcast_to(total, {2048}));
  });
  step({Array::from_floats({1024}, std::vector<float>(1024, 1))});
  EXPECT_EQ(step.last_execution().peak_footprint_bytes, step.last_execution().peak_bytes);
  // Each value lives from its definition to its last use (x's ends at the multiply): x, t and
  // the literal 2.0 at the multiply, then the sum and the broadcast, 8 KiB + 4 bytes each time.
  EXPECT_EQ(step.last_execution().peak_bytes, 2 * 1024 * 4 + 4);
}

TEST(ValueAndGrad, MatchesTheDerivativeOfAPolynomial) {
  // f(x) = sum(x^3 + 2x), f'(x) = 3x^2 + 2.
  TreeFunction f = [](const std::vector<Tree>& args) {
    const Array& x = args[0].leaf();
    return Tree(sum(x * x * x + x * 2.0));
  };
  Tree result = value_and_grad(f)({Array::from_doubles({3}, {1, -2, 0.5})});
  EXPECT_DOUBLE_EQ(result[0].leaf().item(), (1 + 2) + (-8 - 4) + (0.125 + 1));
  EXPECT_EQ(result[1].leaf().to_doubles(), (std::vector<double>{5, 14, 2.75}));
}

TEST(ValueAndGrad, InsideJitTheBackwardPassIsPartOfTheProgram) {
  TreeFunction f = [](const std::vector<Tree>& args) { return Tree(sum(tanh(args[0].leaf()))); };
  TreeFunction g = value_and_grad(f);
  std::string text = make_program(g, {Array::from_floats({2}, {0, 1})});
  EXPECT_THAT(text, HasSubstr("tanh"));
  EXPECT_THAT(text, HasSubstr("mul"));  // the VJP of tanh: ct * (1 - ans^2)
  Tree out = jit(g)({Array::from_floats({2}, {0, 1})});
  EXPECT_NEAR(out[1].leaf().to_floats()[1], 1 - std::tanh(1.0) * std::tanh(1.0), 1e-6);
}

TEST(ValueAndGrad, IntegerArgumentsAreRefusedAsInJax) {
  TreeFunction f = [](const std::vector<Tree>& args) { return Tree(sum(astype(args[0].leaf(), DType::f32))); };
  try {
    value_and_grad(f)({Array::from_ints({2}, {1, 2})});
    FAIL() << "expected an error";
  } catch (const EngineError& error) {
    EXPECT_THAT(error.what(), HasSubstr("grad requires real-valued inputs"));
    EXPECT_THAT(error.what(), HasSubstr("i32[2]"));
  }
}

TEST(ValueAndGrad, NonScalarOutputIsRefused) {
  TreeFunction f = [](const std::vector<Tree>& args) { return Tree(args[0].leaf() * 2.0); };
  EXPECT_THAT([&] { value_and_grad(f)({Array::from_floats({2}, {1, 2})}); },
              ::testing::ThrowsMessage<EngineError>(HasSubstr("scalar-output functions")));
}

TEST(DebugPrint, PrintsInBothModes) {
  TreeFunction f = [](const std::vector<Tree>& args) {
    return Tree(debug_print("x", args[0].leaf()) + 1.0);
  };
  ::testing::internal::CaptureStderr();
  jit(f)({Array::from_floats({2}, {1, 2})});
  {
    DisableJit op_by_op;
    f({Array::from_floats({2}, {3, 4})});
  }
  std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(printed, HasSubstr("x: f32[2] [1, 2]"));
  EXPECT_THAT(printed, HasSubstr("x: f32[2] [3, 4]"));
}

}  // namespace
}  // namespace pmap_engine
