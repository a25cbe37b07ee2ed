// The engine example of docs/engine.md ("One device"), verbatim between the markers, so that
// the page cannot drift from the API: it must compile, train, and keep its loss on the
// documented path.
#include <gtest/gtest.h>

#include <cmath>

#include "pmap_engine/ops.h"
#include "pmap_engine/optim.h"
#include "pmap_engine/transforms.h"

namespace {

TEST(ReadmeExample, TheDocumentedStepTrainsTheMlp) {
  // --- docs/engine.md example begins ---
  namespace pe = pmap_engine;
  pe::TreeFunction loss_fn = [](const std::vector<pe::Tree>& a) {  // params, x, y
    const pe::Tree& p = a[0];
    auto h = pe::tanh(pe::matmul(a[1], p["dense0"]["kernel"]) + p["dense0"]["bias"].leaf());
    auto logits = pe::matmul(h, p["dense1"]["kernel"]) + p["dense1"]["bias"].leaf();
    return pe::Tree(pe::mean(pe::softmax_cross_entropy_with_integer_labels(logits, a[2])));
  };
  pe::optim::GradientTransformation optimizer = pe::optim::adam(1e-3);
  pe::JitOptions options;
  options.donate_argnums = {0, 1};
  pe::Jitted step = pe::jit(
      [&](const std::vector<pe::Tree>& a) {  // params, opt_state, x, y
        pe::Tree loss_and_grads = pe::value_and_grad(loss_fn)({a[0], a[2], a[3]});
        auto [updates, state] = optimizer.update(loss_and_grads[1], a[1], a[0]);
        return pe::Tree::tuple({pe::optim::apply_updates(a[0], updates), state, loss_and_grads[0]});
      },
      options);
  // --- docs/engine.md example ends ---

  pe::Tree params = pe::Tree::dict(
      {{"dense0", pe::Tree::dict({{"kernel", pe::full({4, 8}, 0.1)}, {"bias", pe::zeros({8})}})},
       {"dense1", pe::Tree::dict({{"kernel", pe::full({8, 3}, -0.1)}, {"bias", pe::zeros({3})}})}});
  pe::Tree state = optimizer.init(params);
  pe::Array x =
      pe::iota(pe::DType::f32, {6, 4}, 0) * 0.3 - pe::iota(pe::DType::f32, {6, 4}, 1) * 0.1;
  pe::Array y = pe::Array::from_ints({6}, {0, 1, 2, 0, 1, 2});
  double first_loss = 0;
  double last_loss = 0;
  for (int i = 0; i < 20; ++i) {
    pe::Tree out = step({params, state, x, y});
    params = out[0];
    state = out[1];
    last_loss = out[2].leaf().item();
    if (i == 0) first_loss = last_loss;
  }
  // Equal logits at the start: the loss is log(3) exactly (up to f32 rounding).
  EXPECT_NEAR(first_loss, std::log(3.0), 1e-6);
  EXPECT_LT(last_loss, first_loss);
  EXPECT_EQ(step.cache_stats().misses, 1);
}

}  // namespace
