// optax-style optimizers: trajectories against NumPy (and torch for Adam, RMSprop, Adagrad),
// state layout and counts, clipping, schedules, dtype handling of apply_updates, and jit vs op
// by op.
//
// The problem every trajectory runs on: params {"b": [0.5, -1], "w": [[1, -2], [0.25, 3]]}
// (f64), loss 0.5 * sum(k * p^2) with k = {"b": [1, 2], "w": [[0.5, 1.5], [4, 0.25]]}, so the
// gradient is k * p. Expected params after each step come from NumPy 1.24.2 (f64), written
// from optax's formulas independently of the engine; leaves flattened b then w:
//   import numpy as np, math
//   p0 = [np.array([0.5, -1.0]), np.array([1.0, -2.0, 0.25, 3.0])]
//   k = [np.array([1.0, 2.0]), np.array([0.5, 1.5, 4.0, 0.25])]
//   grad = lambda p: [ki * pi for ki, pi in zip(k, p)]
//   def run(step, n, state):
//     p = [x.copy() for x in p0]; out = []
//     for i in range(n): p = step(p, grad(p), state, i); out.append(np.concatenate(p))
//     return out
//   def sgd(lr): return lambda p, g, s, i: [pi + (-lr) * gi for pi, gi in zip(p, g)]
//   def momentum(lr, m, nesterov):
//     def step(p, g, s, i):
//       s['t'] = [gi + m * ti for gi, ti in zip(g, s['t'])]
//       u = [gi + m * ti for gi, ti in zip(g, s['t'])] if nesterov else s['t']
//       return [pi + (-lr) * ui for pi, ui in zip(p, u)]
//     return step
//   def adam(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
//     def step(p, g, s, i):
//       s['m'] = [(1 - b1) * gi + b1 * mi for gi, mi in zip(g, s['m'])]
//       s['v'] = [(1 - b2) * (gi * gi) + b2 * vi for gi, vi in zip(g, s['v'])]
//       n = i + 1
//       u = [(mi / (1 - b1 ** n)) / (np.sqrt(vi / (1 - b2 ** n)) + eps)
//            for mi, vi in zip(s['m'], s['v'])]
//       u = [ui + wd * pi for ui, pi in zip(u, p)] if wd else u
//       rate = lr(i) if callable(lr) else lr
//       return [pi + (-rate) * ui for pi, ui in zip(p, u)]
//     return step
//   def clipped_sgd(lr, max_norm):
//     def step(p, g, s, i):
//       norm = math.sqrt(sum(float((gi * gi).sum()) for gi in g))
//       if not norm < max_norm: g = [(gi / norm) * max_norm for gi in g]
//       return [pi + (-lr) * gi for pi, gi in zip(p, g)]
//     return step
//   def cosine(init, steps, alpha):
//     return lambda c: init * ((1 - alpha) * (0.5 * (1 + math.cos(math.pi * min(c, steps)
//                                                                  / steps))) + alpha)
//   zeros = lambda: [np.zeros(2), np.zeros(4)]
//   run(sgd(0.1), 3, {})                                        # kSgd
//   run(momentum(0.1, 0.9, False), 3, {'t': zeros()})           # kMomentum
//   run(momentum(0.1, 0.9, True), 3, {'t': zeros()})            # kNesterov
//   run(adam(0.01), 4, {'m': zeros(), 'v': zeros()})            # kAdam
//   run(adam(0.01, wd=0.1), 3, {'m': zeros(), 'v': zeros()})    # kAdamW
//   run(clipped_sgd(0.1, 1.0), 3, {})                           # kClippedSgd
//   run(adam(cosine(0.01, 4, 0.1)), 4, {'m': zeros(), 'v': zeros()})  # kAdamCosine
// kAdam is also exactly what torch 1.13's torch.optim.Adam(lr=0.01) printed (repr, f64) for the
// same problem:
//   torch.set_default_dtype(torch.float64)
//   b = torch.tensor([0.5, -1.0], requires_grad=True)
//   w = torch.tensor([1.0, -2.0, 0.25, 3.0], requires_grad=True)
//   kb = torch.tensor([1.0, 2.0]); kw = torch.tensor([0.5, 1.5, 4.0, 0.25])
//   opt = torch.optim.Adam([b, w], lr=0.01)
//   for _ in range(4):
//     opt.zero_grad(); (0.5 * (kb * b * b).sum() + 0.5 * (kw * w * w).sum()).backward()
//     opt.step(); print(torch.cat([b, w]).detach())
#include "pmap_engine/optim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using pmap_engine::testing::expect_error_mentions;
using ::testing::HasSubstr;
using Trajectory = std::vector<std::vector<double>>;

const Trajectory kSgd = {
    {0.45, -0.8, 0.95, -1.7, 0.15, 2.925},
    {0.405, -0.64, 0.9025, -1.4449999999999998, 0.09, 2.8518749999999997},
    {0.36450000000000005, -0.512, 0.857375, -1.2282499999999998, 0.054, 2.780578125},
};
const Trajectory kMomentum = {
    {0.45, -0.8, 0.95, -1.7, 0.15, 2.925},
    {0.36, -0.45999999999999996, 0.8574999999999999, -1.1749999999999998, -2.7755575615628914e-17,
     2.784375},
    {0.243, -0.06199999999999989, 0.7313749999999999, -0.5262499999999997, -0.13500000000000004,
     2.5882031249999997},
};
const Trajectory kNesterov = {
    {0.405, -0.62, 0.905, -1.43, 0.06, 2.8575},
    {0.28755000000000003, -0.2224, 0.778525, -0.7794499999999998, -0.06660000000000002,
     2.6610187499999998},
    {0.16366050000000001, 0.108352, 0.6314626249999999, -0.16486174999999959, -0.10832400000000003,
     2.422080984375},
};
const Trajectory kAdam = {
    {0.4900000002, -0.99000000005, 0.9900000002, -1.9900000000333333, 0.2400000001,
     2.990000000133333},
    {0.4800057760685646, -0.9800027459961475, 0.980002746296815, -1.9800013380206312,
     0.2300127189994745, 2.9800008845076613},
    {0.4700213297082392, -0.9700100993784, 0.9700100998303501, -1.9700049115924012,
     0.2200473936303452, 2.970003244346798},
    {0.4600507681658222, -0.9600239397230647, 0.9600239403268583, -1.9600116200571451,
     0.21011384126505284, 2.9600076704889315},
};
const Trajectory kAdamW = {
    {0.4895000002, -0.98900000005, 0.9890000002, -1.9880000000333333, 0.2397500001,
     2.9870000001333334},
    {0.4790165949632575, -0.9780140360689854, 0.9780140363695736, -1.976013613978823,
     0.22952334796732848, 2.9740141558042996},
    {0.46855399132524367, -0.9670441523454767, 0.9670441527971855, -1.9640419110210767,
     0.21932953458764248, 2.961043225485825},
};
const Trajectory kClippedSgd = {
    {0.4871168674719834, -0.9484674698879335, 0.9871168674719834, -1.9227012048319003,
     0.22423373494396676, 2.980675301207975},
    {0.4739835346042476, -0.8973235254751529, 0.9738098612219771, -1.8449432479191072,
     0.2000511497957393, 2.9605845367962633},
    {0.4605928995165011, -0.8466224736113135, 0.9600541803338634, -1.7667602732369363,
     0.1774443565193819, 2.9396744712115144},
};
const Trajectory kAdamCosine = {
    {0.4900000002, -0.99000000005, 0.9900000002, -1.9900000000333333, 0.2400000001,
     2.990000000133333},
    {0.48132303428249423, -0.9813204035597554, 0.9813204038405646, -1.9813191811559587,
     0.23132906210840198, 2.9813187874300624},
    {0.47583096267464486, -0.9758241639574277, 0.9758241643214147, -1.9758210116688573,
     0.22584663194579285, 2.975819996912478},
    {0.4735183489716536, -0.9735087099798111, 0.9735087103789533, -1.973504241702841,
     0.22354059742295665, 2.9735028031867525},
};

Tree initial_params() {
  return Tree::dict({{"b", Array::from_doubles({2}, {0.5, -1.0})},
                     {"w", Array::from_doubles({2, 2}, {1.0, -2.0, 0.25, 3.0})}});
}

// d/dp 0.5 * sum(k * p^2) = k * p.
Tree quadratic_grads(const Tree& params) {
  return Tree::dict(
      {{"b", params["b"].leaf() * Array::from_doubles({2}, {1.0, 2.0})},
       {"w", params["w"].leaf() * Array::from_doubles({2, 2}, {0.5, 1.5, 4.0, 0.25})}});
}

std::vector<double> flatten(const Tree& tree) {
  std::vector<double> values;
  for (const Array& leaf : tree.leaves()) {
    std::vector<double> leaf_values = leaf.to_doubles();
    values.insert(values.end(), leaf_values.begin(), leaf_values.end());
  }
  return values;
}

struct OptimizerRun {
  Trajectory params_after_step;
  Tree final_state;
};

OptimizerRun run_optimizer(const optim::GradientTransformation& optimizer, size_t num_steps) {
  OptimizerRun run;
  Tree params = initial_params();
  Tree state = optimizer.init(params);
  for (size_t step = 0; step < num_steps; ++step) {
    auto [updates, new_state] = optimizer.update(quadratic_grads(params), state, params);
    params = optim::apply_updates(params, updates);
    state = new_state;
    run.params_after_step.push_back(flatten(params));
  }
  run.final_state = state;
  return run;
}

// Within a few ulps: the engine and NumPy evaluate the same expressions, except b^count (see
// optim.cpp's power_of_count) and the order of the global norm's sum.
void expect_trajectory_near(const Trajectory& actual, const Trajectory& expected,
                            double relative_tolerance = 1e-14) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t step = 0; step < actual.size(); ++step) {
    ASSERT_EQ(actual[step].size(), expected[step].size());
    for (size_t i = 0; i < actual[step].size(); ++i) {
      EXPECT_NEAR(actual[step][i], expected[step][i],
                  relative_tolerance * std::max(1.0, std::abs(expected[step][i])))
          << "step " << step + 1 << ", element " << i;
    }
  }
}

int64_t count_in(const Tree& tree) { return tree.leaf().to_ints().at(0); }

// ---- sgd ---------------------------------------------------------------------------------------

TEST(OptimSgd, PlainMomentumAndNesterovMatchNumPy) {
  expect_trajectory_near(run_optimizer(optim::sgd(0.1), 3).params_after_step, kSgd);
  expect_trajectory_near(run_optimizer(optim::sgd(0.1, 0.9), 3).params_after_step, kMomentum);
  expect_trajectory_near(run_optimizer(optim::sgd(0.1, 0.9, true), 3).params_after_step, kNesterov);
}

TEST(OptimSgd, StateIsOptaxsTuples) {
  Tree params = initial_params();
  // optax.sgd(lr): (EmptyState(), EmptyState()); with momentum: (TraceState(trace), EmptyState()).
  EXPECT_EQ(optim::sgd(0.1).init(params).structure(), "((), ())");
  Tree with_momentum = optim::sgd(0.1, 0.9).init(params);
  EXPECT_EQ(with_momentum.structure(), "(({'b': *, 'w': *},), ())");
  EXPECT_EQ(flatten(with_momentum), std::vector<double>(6, 0.0));
}

TEST(OptimSgd, OptaxDocstringExampleInFloat32) {
  // optax/_src/alias.py sgd docstring: solver = optax.sgd(learning_rate=0.003) on
  // f(x) = sum(x ** 2) from [1, 2, 3] prints 'Objective function: {:.2E}' after each of 5 steps:
  // 1.38E+01, 1.37E+01, 1.35E+01, 1.33E+01, 1.32E+01.
  optim::GradientTransformation solver = optim::sgd(0.003);
  Tree params = Array::from_floats({3}, {1, 2, 3});
  Tree state = solver.init(params);
  TreeFunction f = [](const std::vector<Tree>& args) { return Tree(sum(square(args[0].leaf()))); };
  const char* expected[] = {"1.38E+01", "1.37E+01", "1.35E+01", "1.33E+01", "1.32E+01"};
  for (const char* printed : expected) {
    auto [updates, new_state] = solver.update(grad(f)({params}), state, params);
    params = optim::apply_updates(params, updates);
    state = new_state;
    char text[32];
    std::snprintf(text, sizeof(text), "%.2E", f({params}).leaf().item());
    EXPECT_STREQ(text, printed);
  }
  EXPECT_EQ(params.leaf().dtype(), DType::f32);
}

// ---- adam / adamw ------------------------------------------------------------------------------

TEST(OptimAdam, MatchesNumPyAndTorchTrajectory) {
  expect_trajectory_near(run_optimizer(optim::adam(0.01), 4).params_after_step, kAdam);
}

TEST(OptimAdam, StateLayoutAndCountIncrements) {
  // design.md's spelling: a float learning rate is accepted as is.
  EXPECT_EQ(optim::adam(1e-3f).init(initial_params()).structure(),
            optim::adam(0.01).init(initial_params()).structure());
  optim::GradientTransformation adam = optim::adam(0.01);
  Tree state = adam.init(initial_params());
  // (ScaleByAdamState(count, mu, nu), EmptyState()).
  EXPECT_EQ(state.structure(), "((*, {'b': *, 'w': *}, {'b': *, 'w': *}), ())");
  EXPECT_EQ(state[0][0].leaf().dtype(), DType::i32);
  EXPECT_EQ(state[0][0].leaf().shape(), Shape{});
  EXPECT_EQ(count_in(state[0][0]), 0);
  OptimizerRun run = run_optimizer(adam, 3);
  EXPECT_EQ(count_in(run.final_state[0][0]), 3);
  // mu after 3 steps is nonzero and shaped like params.
  EXPECT_EQ(run.final_state[0][1]["w"].leaf().shape(), (Shape{2, 2}));
}

// Adam on the host in double over the test's quadratic loss (gradient k[i] * p[i]): the moments
// as both torch and optax keep them, and `step` turning (m, v, bias corrections) into the
// parameter's decrement, so each test writes out the formula it checks.
Trajectory host_adam(
    double b1, double b2, size_t num_steps,
    const std::function<double(double m, double v, double bc1, double bc2)>& step) {
  std::vector<double> p = flatten(initial_params());
  const std::vector<double> k = {1.0, 2.0, 0.5, 1.5, 4.0, 0.25};
  std::vector<double> m(p.size(), 0.0);
  std::vector<double> v(p.size(), 0.0);
  Trajectory trajectory;
  for (size_t t = 1; t <= num_steps; ++t) {
    const double bc1 = 1.0 - std::pow(b1, static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(b2, static_cast<double>(t));
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = k[i] * p[i];
      m[i] = b1 * m[i] + (1.0 - b1) * g;
      v[i] = b2 * v[i] + (1.0 - b2) * g * g;
      p[i] -= step(m[i], v[i], bc1, bc2);
    }
    trajectory.push_back(p);
  }
  return trajectory;
}

TEST(OptimAdam, EqualsTorchAdamWithinRoundingForTenSteps) {
  // optax (scale_by_adam, then scale by -lr), with t the step count from 1:
  //   m_t = (1 - b1) g + b1 m_{t-1},  v_t = (1 - b2) g^2 + b2 v_{t-1}
  //   p_t = p_{t-1} - lr * (m_t / (1 - b1^t)) / (sqrt(v_t / (1 - b2^t)) + eps)
  // torch.optim.Adam (torch/optim/adam.py _single_tensor_adam, amsgrad=False):
  //   m_t = b1 m_{t-1} + (1 - b1) g,  v_t = b2 v_{t-1} + (1 - b2) g^2
  //   bc1 = 1 - b1^t, bc2 = 1 - b2^t
  //   p_t = p_{t-1} - (lr / bc1) * m_t / (sqrt(v_t) / sqrt(bc2) + eps)
  // Since sqrt(v / bc2) = sqrt(v) / sqrt(bc2), the two are the same function of (m, v, t); only
  // the rounding differs. torch's formula is computed here on the host in double.
  const double lr = 0.05, b1 = 0.9, b2 = 0.99, eps = 1e-8;
  const size_t num_steps = 10;
  OptimizerRun run = run_optimizer(optim::adam(lr, b1, b2, eps), num_steps);
  const Trajectory torch =
      host_adam(b1, b2, num_steps, [&](double m, double v, double bc1, double bc2) {
        return (lr / bc1) * m / (std::sqrt(v) / std::sqrt(bc2) + eps);
      });
  expect_trajectory_near(run.params_after_step, torch, 1e-13);
}

TEST(OptimAdam, EpsRootGoesInsideTheSqrt) {
  // optax/_src/transform.py scale_by_adam: mu_hat / (sqrt(nu_hat + eps_root) + eps). Derived on
  // the host in double as in the test above, with eps_root added under the root; eps_root = 1e-2
  // is large enough that the trajectory differs visibly from plain Adam's.
  const double lr = 0.05, b1 = 0.9, b2 = 0.99, eps = 1e-8, eps_root = 1e-2;
  const size_t num_steps = 5;
  OptimizerRun run = run_optimizer(optim::adam(lr, b1, b2, eps, eps_root), num_steps);
  const Trajectory expected =
      host_adam(b1, b2, num_steps, [&](double m, double v, double bc1, double bc2) {
        return lr * (m / bc1) / (std::sqrt(v / bc2 + eps_root) + eps);
      });
  expect_trajectory_near(run.params_after_step, expected, 1e-13);
  EXPECT_NE(run.params_after_step,
            run_optimizer(optim::adam(lr, b1, b2, eps), num_steps).params_after_step);
}

TEST(OptimAdamW, MatchesNumPyAndZeroDecayIsAdam) {
  expect_trajectory_near(
      run_optimizer(optim::adamw(0.01, 0.9, 0.999, 1e-8, /*eps_root=*/0.0, /*weight_decay=*/0.1), 3)
          .params_after_step,
      kAdamW);
  // State: (ScaleByAdamState, EmptyState (add_decayed_weights), EmptyState (lr)).
  EXPECT_EQ(optim::adamw(0.01).init(initial_params()).structure(),
            "((*, {'b': *, 'w': *}, {'b': *, 'w': *}), (), ())");
  // add_decayed_weights(0) is skipped entirely, as optax does: bitwise Adam.
  EXPECT_EQ(run_optimizer(optim::adamw(0.01, 0.9, 0.999, 1e-8, 0.0, 0.0), 3).params_after_step,
            run_optimizer(optim::adam(0.01), 3).params_after_step);
}

TEST(OptimAddDecayedWeights, NeedsParams) {
  optim::GradientTransformation decay = optim::add_decayed_weights(0.1);
  Tree grads = quadratic_grads(initial_params());
  expect_error_mentions([&] { decay.update(grads, decay.init(initial_params()), Tree()); },
                        {"add_decayed_weights", "params"});
}

// ---- rmsprop, adagrad ---------------------------------------------------------------------------

// An accumulator of squared gradients on the host in double over the test's quadratic loss
// (gradient k[i] * p[i]): `accumulate` maps (v, g) to the new v, `step` (g, v) to the
// parameter's decrement, so each test writes out the formula it checks.
Trajectory host_accumulator(
    double v_init, size_t num_steps, const std::function<double(double v, double g)>& accumulate,
    const std::function<double(double g, double v)>& step) {
  std::vector<double> p = flatten(initial_params());
  const std::vector<double> k = {1.0, 2.0, 0.5, 1.5, 4.0, 0.25};
  std::vector<double> v(p.size(), v_init);
  Trajectory trajectory;
  for (size_t t = 0; t < num_steps; ++t) {
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = k[i] * p[i];
      v[i] = accumulate(v[i], g);
      p[i] -= step(g, v[i]);
    }
    trajectory.push_back(p);
  }
  return trajectory;
}

// torch 1.13 (f64), the same problem and printing as kAdam's snippet above:
//   torch.optim.RMSprop([b, w], lr=0.01, alpha=0.99, eps=1e-8), 3 steps
//   torch.optim.Adagrad([b, w], lr=0.1) (initial_accumulator_value=0, eps=1e-10), 3 steps
const Trajectory kTorchRmsprop = {
    {0.400000019999996, -0.9000000049999998, 0.900000019999996, -1.9000000033333333,
     0.15000000999999905, 2.9000000133333317},
    {0.33733919191401895, -0.8329179679700331, 0.8329179898551095, -1.8309433303456708,
     0.09836023397039997, 2.8303174668228057},
    {0.290433242384113, -0.7799822732436351, 0.7799822994597898, -1.7753494471007127,
     0.06614230579663441, 2.7738885905509547},
};
const Trajectory kTorchAdagrad = {
    {0.40000000002, -0.900000000005, 0.90000000002, -1.9000000000033332, 0.15000000001,
     2.9000000000133332},
    {0.33753049527240914, -0.8331035268450359, 0.8331035268668785, -1.831125053813465,
     0.09855042446913707, 2.8304977903350834},
    {0.2908991768122474, -0.7804561813568098, 0.780456181382929, -1.775821515014557,
     0.06652789982548832, 2.7743593459602667},
};

TEST(OptimRmsprop, OptaxDefaultsPutEpsInsideTheRoot) {
  // optax/_src/transform.py scale_by_rms (decay 0.9, eps 1e-8, initial_scale 0, eps_in_sqrt):
  //   nu = (1 - decay) g^2 + decay nu,  update = -lr g rsqrt(nu + eps).
  // First step by hand: nu = 0.1 g^2, so p1 = p0 - lr g / sqrt(0.1 g^2 + 1e-8), about
  // p0 - 3.16 lr sign(g) here (|g| >= 0.5 >> sqrt(1e-7)); for b[0] (g = 0.5):
  // 0.5 - 0.01 * 0.5 / sqrt(0.025 + 1e-8), within 1e-8 of 0.5 - 0.01 sqrt(10).
  const double lr = 0.01, decay = 0.9, eps = 1e-8;
  OptimizerRun run = run_optimizer(optim::rmsprop(lr), 4);
  EXPECT_NEAR(run.params_after_step[0][0], 0.5 - lr * 0.5 / std::sqrt(0.025 + 1e-8), 1e-15);
  EXPECT_NEAR(run.params_after_step[0][0], 0.5 - lr * std::sqrt(10.0), 1e-8);
  expect_trajectory_near(
      run.params_after_step,
      host_accumulator(
          0.0, 4, [&](double v, double g) { return (1 - decay) * g * g + decay * v; },
          [&](double g, double v) { return lr * g / std::sqrt(v + eps); }));
  // State: (ScaleByRmsState (nu,), EmptyState (lr)).
  EXPECT_EQ(optim::rmsprop(lr).init(initial_params()).structure(), "(({'b': *, 'w': *},), ())");
}

TEST(OptimRmsprop, EpsOutsideTheRootIsTorchsRmsprop) {
  // torch/optim/rmsprop.py: square_avg = alpha square_avg + (1 - alpha) g^2,
  // p -= lr g / (sqrt(square_avg) + eps). First step: lr g / (0.1 |g| + 1e-8) = 10 lr sign(g),
  // 0.5 -> 0.4 (kTorchRmsprop's first row). optax computes 1 / (sqrt(nu) + eps) and multiplies,
  // torch divides: the same within rounding.
  OptimizerRun run = run_optimizer(optim::rmsprop(0.01, 0.99, 1e-8, 0.0, false), 3);
  expect_trajectory_near(run.params_after_step, kTorchRmsprop, 1e-13);
  // An initial scale of 1 (TF1's) changes the first step: 1 / sqrt(0.9 + 0.1 g^2).
  OptimizerRun tf1 = run_optimizer(optim::rmsprop(0.01, 0.9, 0.0, 1.0), 1);
  EXPECT_NEAR(tf1.params_after_step[0][0], 0.5 - 0.01 * 0.5 / std::sqrt(0.9 + 0.1 * 0.25),
              1e-15);
}

TEST(OptimAdagrad, OptaxDefaultsStartTheSumAtOneTenth) {
  // optax/_src/transform.py scale_by_rss (initial_accumulator_value 0.1, eps 1e-7):
  //   s = s + g^2,  update = -lr g where(s > 0, rsqrt(s + eps), 0).
  // First step by hand: p1 = p0 - lr g / sqrt(0.1 + g^2 + 1e-7); for b[0] (g = 0.5):
  // 0.5 - 0.1 * 0.5 / sqrt(0.35 + 1e-7).
  const double lr = 0.1, eps = 1e-7;
  OptimizerRun run = run_optimizer(optim::adagrad(lr), 3);
  EXPECT_NEAR(run.params_after_step[0][0], 0.5 - lr * 0.5 / std::sqrt(0.35 + 1e-7), 1e-15);
  expect_trajectory_near(
      run.params_after_step,
      host_accumulator(
          0.1, 3, [](double s, double g) { return s + g * g; },
          [&](double g, double s) { return lr * g / std::sqrt(s + eps); }));
  EXPECT_EQ(optim::adagrad(lr).init(initial_params()).structure(), "(({'b': *, 'w': *},), ())");
}

TEST(OptimAdagrad, EpsOutsideTheRootIsTorchsAdagrad) {
  // torch/optim/adagrad.py _single_tensor_adagrad (lr_decay 0): state_sum += g^2,
  // p -= lr g / (sqrt(state_sum) + eps). First step: lr g / (|g| + 1e-10) = lr sign(g), every
  // element moved by lr whatever its gradient (kTorchAdagrad's first row).
  OptimizerRun run = run_optimizer(optim::adagrad(0.1, 0.0, 1e-10, false), 3);
  expect_trajectory_near(run.params_after_step, kTorchAdagrad, 1e-13);
}

TEST(OptimAdagrad, AZeroSumGivesAZeroUpdateNotNaN) {
  // optax's where(s > 0, ..., 0): a zero gradient on a zero accumulator with eps = 0 moves
  // nothing (rsqrt(0) * 0 would be NaN), in both placements.
  const Tree params = Tree::dict({{"w", Array::from_doubles({2}, {1.0, 2.0})}});
  const Tree grads = Tree::dict({{"w", Array::from_doubles({2}, {0.0, 3.0})}});
  for (const bool eps_in_sqrt : {true, false}) {
    const optim::GradientTransformation adagrad = optim::adagrad(0.1, 0.0, 0.0, eps_in_sqrt);
    const auto [updates, state] = adagrad.update(grads, adagrad.init(params), params);
    EXPECT_EQ(updates["w"].leaf().to_doubles(), (std::vector<double>{0.0, -0.1}))
        << "eps_in_sqrt " << eps_in_sqrt;
  }
}

// ---- clip_by_global_norm -----------------------------------------------------------------------

TEST(OptimClipByGlobalNorm, ScalesExactlyAboveTheLimitOnly) {
  // Two leaves [3] and [4]: global norm 5, across leaves.
  Tree updates =
      Tree::dict({{"a", Array::from_doubles({1}, {3.0})}, {"b", Array::from_doubles({1}, {4.0})}});
  EXPECT_EQ(optim::global_norm(updates).item(), 5.0);
  auto clipped = [&](double max_norm) {
    optim::GradientTransformation clip = optim::clip_by_global_norm(max_norm);
    return flatten(clip.update(updates, clip.init(updates), Tree()).first);
  };
  // Below the limit: untouched.
  EXPECT_EQ(clipped(10.0), (std::vector<double>{3.0, 4.0}));
  // Above: (t / g_norm) * max_norm, exactly optax's expression.
  EXPECT_EQ(clipped(2.5), (std::vector<double>{(3.0 / 5.0) * 2.5, (4.0 / 5.0) * 2.5}));
  EXPECT_EQ(clipped(1.0), (std::vector<double>{3.0 / 5.0, 4.0 / 5.0}));
  // At the limit: g_norm < max_norm is false, so the clip branch runs (and is the identity
  // up to rounding).
  EXPECT_EQ(clipped(5.0), (std::vector<double>{(3.0 / 5.0) * 5.0, (4.0 / 5.0) * 5.0}));
  // State is EmptyState.
  EXPECT_EQ(optim::clip_by_global_norm(1.0).init(updates).structure(), "()");
}

TEST(OptimClipByGlobalNorm, ChainedWithSgdMatchesNumPy) {
  optim::GradientTransformation optimizer =
      optim::chain({optim::clip_by_global_norm(1.0), optim::sgd(0.1)});
  OptimizerRun run = run_optimizer(optimizer, 3);
  expect_trajectory_near(run.params_after_step, kClippedSgd);
  EXPECT_EQ(run.final_state.structure(), "((), ((), ()))");
}

TEST(OptimChain, RejectsAStateOfAnotherShape) {
  optim::GradientTransformation optimizer =
      optim::chain({optim::clip_by_global_norm(1.0), optim::sgd(0.1)});
  Tree params = initial_params();
  expect_error_mentions([&] { optimizer.update(quadratic_grads(params), Tree::tuple({}), params); },
                        {"chain", "init"});
}

// ---- schedules ---------------------------------------------------------------------------------

std::vector<double> schedule_values(const optim::Schedule& schedule, int num_counts) {
  std::vector<double> values;
  for (int count = 0; count < num_counts; ++count) {
    values.push_back(schedule(Array::from_ints({}, {count})).item());
  }
  return values;
}

TEST(OptimSchedule, CosineDecayValues) {
  // Python (math.cos, f64): 0.1 * ((1 - 0.1) * (0.5 * (1 + cos(pi * min(c, 4) / 4))) + 0.1)
  // for c = 0..5.
  const std::vector<double> expected = {0.1,
                                        0.08681980515339464,
                                        0.05500000000000001,
                                        0.023180194846605367,
                                        0.010000000000000002,
                                        0.010000000000000002};
  std::vector<double> f64 =
      schedule_values(optim::cosine_decay_schedule(0.1, 4, 0.1, DType::f64), 6);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(f64[i], expected[i], 1e-17) << i;
  // JAX's default float32 (jax_enable_x64 off): the same within f32 rounding.
  optim::Schedule f32_schedule = optim::cosine_decay_schedule(0.1, 4, 0.1);
  EXPECT_EQ(f32_schedule(Array::from_ints({}, {0})).dtype(), DType::f32);
  std::vector<double> f32 = schedule_values(f32_schedule, 6);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(f32[i], expected[i], 3e-8) << i;
}

TEST(OptimSchedule, CosineRejectsNonPositiveDecaySteps) {
  expect_error_mentions([] { optim::cosine_decay_schedule(0.1, 0); },
                        {"cosine_decay_schedule", "decay_steps=0"});
}

TEST(OptimSchedule, ConstantScheduleEqualsTheScalarRateBitwise) {
  EXPECT_EQ(schedule_values(optim::constant_schedule(0.25), 3),
            (std::vector<double>{0.25, 0.25, 0.25}));
  OptimizerRun with_schedule = run_optimizer(optim::adam(optim::constant_schedule(0.01)), 3);
  EXPECT_EQ(with_schedule.params_after_step, run_optimizer(optim::adam(0.01), 3).params_after_step);
  // scale_by_learning_rate with a schedule keeps ScaleByScheduleState(count).
  EXPECT_EQ(with_schedule.final_state.structure(),
            "((*, {'b': *, 'w': *}, {'b': *, 'w': *}), (*,))");
  EXPECT_EQ(count_in(with_schedule.final_state[1][0]), 3);
}

TEST(OptimSchedule, AdamWithCosineDecayMatchesNumPy) {
  // A lambda is accepted where a schedule is.
  optim::Schedule cosine = optim::cosine_decay_schedule(0.01, 4, 0.1, DType::f64);
  auto schedule = [cosine](const Array& count) { return cosine(count); };
  expect_trajectory_near(run_optimizer(optim::adam(schedule), 4).params_after_step, kAdamCosine);
}

TEST(OptimSchedule, CountSaturatesAtInt32Max) {
  // optax's safe_increment: the count stops at iinfo(int32).max instead of wrapping.
  optim::GradientTransformation scaled = optim::scale_by_schedule(optim::constant_schedule(1.0));
  const int32_t max_count = std::numeric_limits<int32_t>::max();
  Tree state = Tree::tuple({Tree(Array::from_ints({}, {max_count - 1}))});
  Tree grads = quadratic_grads(initial_params());
  state = scaled.update(grads, state, Tree()).second;
  EXPECT_EQ(count_in(state[0]), max_count);
  state = scaled.update(grads, state, Tree()).second;
  EXPECT_EQ(count_in(state[0]), max_count);
}

// ---- apply_updates -----------------------------------------------------------------------------

TEST(OptimApplyUpdates, AddsInThePromotedDtypeAndCastsBackToTheParams) {
  // bf16 param 1 + f32 update: the sum is formed in f32 and rounded to bf16 (8 significant
  // bits, spacing 2^-7 above 1): 1 + 2^-8 is a tie and rounds to even (1), 1 + 0.005 rounds to
  // 1 + 2^-7 = 1.0078125.
  Tree params = astype(Array::from_floats({2}, {1.0f, 1.0f}), DType::bf16);
  Tree updates = Array::from_floats({2}, {0.00390625f, 0.005f});
  Tree out = optim::apply_updates(params, updates);
  EXPECT_EQ(out.leaf().dtype(), DType::bf16);
  EXPECT_EQ(out.leaf().to_floats(), (std::vector<float>{1.0f, 1.0078125f}));
  expect_error_mentions([&] { optim::apply_updates(initial_params(), updates); },
                        {"apply_updates", "structure"});
}

// ---- jit ---------------------------------------------------------------------------------------

TEST(OptimJit, AdamwStepInsideJitEqualsOpByOpBitwise) {
  // A float32 step with a schedule and clipping, so counts, bias corrections and cos all run
  // inside the trace.
  optim::GradientTransformation optimizer = optim::chain(
      {optim::clip_by_global_norm(1.0),
       optim::adamw(optim::cosine_decay_schedule(0.01, 10, 0.0), 0.9, 0.999, 1e-8, 0.0, 0.01)});
  auto step = [&](const Tree& params, const Tree& state) {
    Tree grads = tree_map([](const Array& p) { return p * 3.0 - 0.5; }, params);
    auto [updates, new_state] = optimizer.update(grads, state, params);
    return Tree::tuple({optim::apply_updates(params, updates), new_state});
  };
  Jitted jitted = jit([&](const std::vector<Tree>& args) { return step(args[0], args[1]); });
  Tree params = Tree::dict({{"w", Array::from_floats({2, 2}, {0.5f, -1.5f, 2.0f, 0.25f})},
                            {"b", Array::from_floats({2}, {0.1f, -0.2f})}});
  Tree eager_params = params;
  Tree eager_state = optimizer.init(params);
  Tree jit_params = params;
  Tree jit_state = eager_state;
  for (int i = 0; i < 3; ++i) {
    Tree eager = step(eager_params, eager_state);
    eager_params = eager[0];
    eager_state = eager[1];
    Tree traced = jitted({jit_params, jit_state});
    jit_params = traced[0];
    jit_state = traced[1];
  }
  EXPECT_EQ(jitted.cache_stats().misses, 1);
  ASSERT_EQ(eager_params.leaves().size(), jit_params.leaves().size());
  for (size_t i = 0; i < eager_params.leaves().size(); ++i) {
    EXPECT_EQ(eager_params.leaves()[i].to_floats(), jit_params.leaves()[i].to_floats()) << i;
  }
  EXPECT_EQ(flatten(eager_state), flatten(jit_state));
  EXPECT_EQ(count_in(jit_state[1][0][0]), 3);  // scale_by_adam's count
  std::string program = jitted.program_text({jit_params, jit_state});
  EXPECT_THAT(program, HasSubstr("cos"));
  EXPECT_THAT(program, HasSubstr("sqrt"));
}

}  // namespace
}  // namespace pmap_engine
