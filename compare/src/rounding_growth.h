// How much larger one producer's rounding may be than the other's where the frameworks differ in
// arithmetic by design, read from the runs' case: the oracle check widens its bands by it
// (oracle_check.cpp, tensor_oracle.cpp), so that a faithful port is not judged less accurate than
// PyTorch's arithmetic lets it be. 1 where nothing is known to differ.
//
//   statistics  BatchNorm's statistics: ATen accumulates a channel's n values in double
//               (aten/src/ATen/native/cpu/batch_norm_kernel.cpp, batch_norm_cpu_collect_stats_*:
//               at::acc_type<float, false> is double); Flax's jnp.mean on XLA:CPU, and the engine,
//               in one f32 accumulator (XLA's TreeReductionRewriter leaves reductions whose
//               dimensions are all 32 or shorter alone: a per-replica batch of 32, a 28 x 28
//               image). The rounding of that sum grows as sqrt(n), n the most values one channel
//               sums on one replica; every tensor from the first BatchNorm on inherits it.
//   optimizer   Adam's bias corrections: optax computes 1 - b^t in f32 (jnp.power of a
//               weak-typed float and an i32 count, then the subtraction), torch in double
//               (Python floats). With b2 = 0.999 the f32 correction is off by 1.3e-5 of itself
//               at t = 1, 216 f32 roundings, and each update's size with it (the square root
//               halves b2's share); chaos grows it like any rounding. The growth is the largest
//               such error over the run's steps, in units of f32's unit roundoff.
#pragma once

#include "parity/common/run_dir.h"

namespace parity::compare {

struct RoundingGrowth {
  double statistics = 1;
  double optimizer = 1;
  double total() const { return statistics * optimizer; }
};

// The larger of the two runs' growths, each factor on its own (1 without a case to read).
RoundingGrowth rounding_growth(const RunDir& a, const RunDir& b);

}  // namespace parity::compare
