// Two sets of named tensors (say, two weight files mapped onto canonical names) compared value
// by value the way compare judges a run's recorded tensors: max |a - b|, relative L2, cosine,
// norm ratio and the tolerance test of tolerance.h.
#pragma once

#include <string>
#include <vector>

#include "parity/common/host_tensor.h"
#include "parity/compare/result.h"

namespace parity::compare {

// One delta per name both sets hold with the same shape, in name order (names held by one set
// only, or with another shape, are the caller's to report). `label_a` and `label_b` name the
// sets in errors: tensors must be F32 or F64.
std::vector<TensorDelta> diff_tensor_sets(const NamedTensors& a, const NamedTensors& b,
                                          const std::string& label_a, const std::string& label_b,
                                          double rtol, double atol);

}  // namespace parity::compare
