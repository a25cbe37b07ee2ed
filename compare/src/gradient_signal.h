// Parameters without gradient signal, decided by the oracle's numbers. Some parameters have a
// gradient that is zero in exact arithmetic: softmax ignores a shift of its input, so attention's
// key bias (query . key_bias is the same for every key) gets none, whatever its name. An f32 run
// computes their gradient as rounding noise of the terms that cancel, an adaptive optimizer
// (Adam divides by the noise's own scale) turns that noise into steps of about lr in a random
// direction, and two producers, or a producer and its oracle, then hold parameters that part
// from the first update on, on any CPU, by chance. Nothing about the port is wrong there, so
// these tensors are reported and judged neither by the tolerance checks nor against the oracle.
//
// The rule: a parameter lacks gradient signal when, at every step the oracle recorded tensors,
// its oracle gradient's L2 norm is below f32's unit roundoff (2^-24) times the largest gradient
// norm of that step. An f32 gradient carries an absolute error of at least that order from the
// large terms the backward pass sums, so a smaller true gradient cannot be resolved in f32; a
// symmetry zero shows in the f64 oracle as 1e-16 of the largest, eight orders below the line.
#pragma once

#include <map>
#include <string>

#include "parity/common/run_dir.h"

namespace parity::compare {

struct GradientSignal {
  // Parameter name -> its largest oracle gradient norm over the recorded steps, relative to
  // each step's largest gradient norm: only the parameters below the line.
  std::map<std::string, double> without_signal;
  size_t steps = 0;  // the oracle's recorded steps the rule read

  bool lacks_signal(const std::string& name) const { return without_signal.count(name) > 0; }
  // One line for a check's details: the parameters, their figure, and why they are not judged;
  // empty when every parameter has signal.
  std::string describe() const;
};

// Reads the oracle's recorded gradients; an oracle that recorded none finds no parameter.
GradientSignal find_gradient_signal(const RunDir& oracle);

}  // namespace parity::compare
