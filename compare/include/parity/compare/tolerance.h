// Tolerances: when a number of run A counts as the same as the number of run B.
//
// The rule is torch.testing.assert_close's (and numpy.isclose's), with B the reference:
//
//   |a - b| <= atol + rtol * |b|
//
// Non-finite values: equal infinities match, NaN never matches (assert_close's equal_nan=False):
// a NaN in either run is a difference the harness must show, never hide.
//
// Loss defaults are assert_close's per-dtype defaults, _DTYPE_PRECISIONS in
// torch/testing/_comparison.py (PyTorch 1.13 through 2.x; {dtype: (rtol, atol)}):
//
//   dtype      rtol     atol      run.json spelling
//   float16    1e-3     1e-5      f16
//   bfloat16   1.6e-2   1e-5      bf16
//   float32    1.3e-6   1e-5      f32
//   float64    1e-7     1e-7      f64
//
// A run's dtype is its compute dtype (master weights stay f32); two runs are judged with the
// looser of their two dtypes, since the less precise run's rounding is what the difference holds.
//
// Tensor defaults (reduced gradients and parameters after the update, element by element) were
// measured, not guessed: see kTensorAtol below.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "parity/compare/result.h"

namespace parity::compare {

// |a - b| <= atol + rtol * |b|, with the non-finite rules above.
bool is_close(double a, double b, double rtol, double atol);
// atol + rtol * |b|: the largest |a - b| that still matches b.
double allowed_difference(double b, double rtol, double atol);

// assert_close's defaults for a run.json dtype ("f32", "bf16", "f16", "f64"); nullopt for a
// dtype parity does not know. allowed_bad_steps is 0.
std::optional<Tolerance> assert_close_tolerance(std::string_view dtype);

// The looser of two tolerances: larger rtol, then larger atol.
Tolerance looser_of(const Tolerance& a, const Tolerance& b);

// The approximate lane of the loss curve: how many compared steps may fall outside the tolerance
// before the check fails (those steps make it a warning instead). Runs of up to 100 steps get
// none: over that horizon f32 DDP and pmap agree at every step of the tanh and linear cases
// (measured, ddp_ref vs pmap_engine, 8 replicas: mlp2-fmnist Adam worst |diff| 4.5e-6 over 200
// steps, SGD+momentum 2.1e-7; linear1024-mse 3.6e-6 over 100). Longer runs may drift chaotically
// in the late steps, so 1% of the compared steps is tolerated (2 of 200, 10 of 1000).
int64_t default_allowed_bad_steps(int64_t num_compared_steps);

// Tensors: recorded gradients (reduced over replicas) and parameters (after the update), element
// by element, with the rule above. Measured, ddp_ref vs pmap_engine with pmean, 8 replicas, f32:
//
//   case, optimizer, steps            worst |diff| gradients   worst |diff| parameters
//   mlp2-fmnist, Adam, 200            1.0e-6                    7.5e-6 (6.5e-6 after step 0)
//   mlp2-fmnist, SGD momentum, 200    4.2e-8                    1.5e-7
//   linear1024-mse, Adam, 100         1.4e-9                    6.6e-7
//   mlp4-1024, Adam, after step 0     5.6e-9                    4.0e-7
//
// Gradients differ by the rounding of two reduction orders. Parameters under Adam differ more,
// and from the first update on: Adam divides by sqrt(v) + eps, so a gradient element near eps
// whose last bits differ moves its parameter by a visible fraction of lr (in theory up to 2 lr
// for a near-zero gradient of opposite signs; such an element is reported as the worst one).
// assert_close's float32 atol (1e-5) leaves only 1.3x headroom over that, so tensors use its
// float32 rtol with atol 5e-5 (6.7x headroom); a real semantic difference is far larger (psum
// instead of pmean: gradients 8x, parameters off by up to 5e-4 after one Adam step).
// Less precise dtypes loosen both to assert_close's defaults for that dtype.
inline constexpr double kTensorRtol = 1.3e-6;
inline constexpr double kTensorAtol = 5e-5;
Tolerance default_tensor_tolerance();

}  // namespace parity::compare
