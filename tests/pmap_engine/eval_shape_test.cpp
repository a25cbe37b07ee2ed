// eval_shape: output types from argument types, without running or allocating anything
// (jax.eval_shape, jax/_src/api.py at jax-v0.11.0: jit(fun).trace(*args).out_info).
#include <gtest/gtest.h>

#include <string>

#include "pmap_engine/ops.h"
#include "pmap_engine/optim.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

Tree struct_of(Shape shape, DType dtype) {
  return Tree(Array::shape_dtype_struct(std::move(shape), dtype));
}

// The docstring's example: A (2000, 3000), x (3000, 1000) f32 -> tanh(A @ x): (2000, 1000) f32.
TEST(EvalShape, GivesTheOutputTypeOfTheDocstringExample) {
  const Tree out = eval_shape(
      [](const std::vector<Tree>& args) {
        return Tree(tanh(matmul(args[0].leaf(), args[1].leaf())));
      },
      {struct_of({2000, 3000}, DType::f32), struct_of({3000, 1000}, DType::f32)});
  ASSERT_TRUE(out.is_leaf());
  EXPECT_TRUE(out.leaf().is_shape_dtype_struct());
  EXPECT_EQ(out.leaf().shape(), (Shape{2000, 1000}));
  EXPECT_EQ(out.leaf().dtype(), DType::f32);
}

// Adam's state for 2^36 f32 parameters (256 GiB each for mu and nu): only types, so the test
// runs in no memory. optax's scale_by_adam keeps mu and nu in the params' dtype (mu_dtype unset).
TEST(EvalShape, AllocatesNothingForStatesLargerThanTheMachine) {
  const Shape huge = {int64_t{1} << 20, int64_t{1} << 16};
  const optim::GradientTransformation adam = optim::adam(1e-3);
  const Tree state = eval_shape([&](const std::vector<Tree>& args) { return adam.init(args[0]); },
                                {Tree::dict({{"w", struct_of(huge, DType::f16)}})});
  // ((count, mu, nu), ()) as optax's (ScaleByAdamState, EmptyState).
  const std::vector<Array> leaves = state.leaves();
  ASSERT_EQ(leaves.size(), 3u) << state.structure();
  EXPECT_EQ(type_to_string(leaves[0].dtype(), leaves[0].shape()), "i32[]");
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_TRUE(leaves[i].is_shape_dtype_struct());
    EXPECT_EQ(leaves[i].shape(), huge);
    EXPECT_EQ(leaves[i].dtype(), DType::f16);
  }
}

// grad's outputs have the primal inputs' types: f16 params give f16 gradients, whatever the
// loss's dtype; f32 params cast to f16 inside the loss (mixed precision) give f32 gradients.
TEST(EvalShape, GradientsTakeTheParametersTypes) {
  const TreeFunction loss = [](const std::vector<Tree>& args) {
    const Array w = astype(args[0]["w"].leaf(), DType::f16);
    return Tree(astype(mean(square(matmul(astype(args[1].leaf(), DType::f16), w))), DType::f32));
  };
  for (DType dtype : {DType::f16, DType::f32}) {
    const Tree grads = eval_shape(grad(loss), {Tree::dict({{"w", struct_of({4096, 11008}, dtype)}}),
                                               struct_of({8, 4096}, DType::f32)});
    EXPECT_EQ(type_to_string(grads["w"].leaf().dtype(), grads["w"].leaf().shape()),
              std::string(dtype_name(dtype)) + "[4096,11008]");
  }
}

TEST(EvalShape, TakesConcreteArgumentsToo) {
  const Tree out =
      eval_shape([](const std::vector<Tree>& args) { return Tree(sum(args[0].leaf())); },
                 {Tree(Array::from_floats({2, 3}, {1, 2, 3, 4, 5, 6}))});
  EXPECT_TRUE(out.leaf().is_shape_dtype_struct());
  EXPECT_EQ(type_to_string(out.leaf().dtype(), out.leaf().shape()), "f32[]");
}

TEST(EvalShape, RaisesTheShapeErrorsTheCallWould) {
  const TreeFunction f = [](const std::vector<Tree>& args) {
    return Tree(matmul(args[0].leaf(), args[1].leaf()));
  };
  const std::vector<Tree> structs = {struct_of({2, 3}, DType::f32), struct_of({4, 5}, DType::f32)};
  std::string abstract_error;
  try {
    eval_shape(f, structs);
  } catch (const EngineError& error) {
    abstract_error = error.what();
  }
  std::string concrete_error;
  try {
    f({Tree(zeros({2, 3})), Tree(zeros({4, 5}))});
  } catch (const EngineError& error) {
    concrete_error = error.what();
  }
  EXPECT_FALSE(abstract_error.empty());
  EXPECT_EQ(abstract_error, concrete_error);
}

TEST(EvalShape, AShapeDtypeStructHasNoValues) {
  const Array type = Array::shape_dtype_struct({3}, DType::f32);
  try {
    type.to_doubles();
    FAIL() << "a ShapeDtypeStruct gave values";
  } catch (const EngineError& error) {
    EXPECT_NE(std::string(error.what()).find("needs the values of a ShapeDtypeStruct f32[3]"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(tanh(type), EngineError);  // an op outside a trace needs the values too
}

}  // namespace
}  // namespace pmap_engine
