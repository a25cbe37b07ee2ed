// One pass over the recorded tensor files of both runs (tensors/step_NNNNNN.safetensors): every
// step either run recorded is read once, two files at a time, and reduced to what the checks
// need: per-tensor deltas at the steps both recorded, the global gradient norm ratio, and each
// run's replica digests. Nothing else is kept, so memory stays at one step's tensors per run.
//
// Vocabulary of a tensor comparison (a from run A, b from the reference run B, element i):
//   max_abs      max_i |a_i - b_i|
//   rel_l2       ||a - b|| / ||b||
//   cosine       a.b / (||a|| ||b||)
//   norm_ratio   ||a|| / ||b||
//   out of tolerance: |a_i - b_i| > atol + rtol |b_i| (tolerance.h)
//   worst element: the one whose difference exceeds its allowance the most
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "parity/common/host_tensor.h"
#include "parity/common/run_dir.h"
#include "parity/compare/result.h"

namespace parity::compare {

struct TensorComparison {
  TensorDelta delta;
  Shape shape;
  size_t num_elements = 0;
  size_t num_out_of_tolerance = 0;
  size_t worst_index = 0;  // flat, row-major
  double worst_a = 0;
  double worst_b = 0;
  double norm_b = 0;        // ||b||, the reference's L2 norm
  bool non_finite = false;  // a NaN or infinity in a or b
};

// A recorded tensor that could not be compared: present in one run only, or shapes differ.
struct TensorMismatch {
  int64_t step = 0;
  std::string name;
  std::string why;
};

struct TensorGroup {  // "grads/", "params/" or "batch_stats/" tensors
  std::vector<TensorComparison> compared;
  std::vector<TensorMismatch> mismatched;
};

struct TensorScan {
  std::vector<int64_t> steps_a, steps_b;  // steps each run recorded tensors at
  std::vector<int64_t> common_steps;      // recorded by both
  TensorGroup grads, params;
  TensorGroup batch_stats;  // model state (BatchNorm running statistics); empty for other models
  // ||grads_A|| / ||grads_B|| over all gradient tensors, per common step.
  std::map<int64_t, double> grad_global_norm_ratio;
  // replicas/param_digests per recorded step, each run's own steps; absent when not recorded.
  std::map<int64_t, std::vector<uint64_t>> digests_a, digests_b;
};

// The file read_step_tensors reads for `step`, for messages (docs/run-dir-format.md).
std::string tensor_file(const RunDir& run, int64_t step);
// A recorded tensor's values; InputError naming `file` and `name` unless it is F32 or F64.
std::vector<double> recorded_values(const HostTensor& tensor, const std::string& name,
                                    const std::string& file);
// a against b element by element (equal lengths), as scan_tensors compares each tensor; the
// delta's step and name are left for the caller.
TensorComparison compare_values(const std::vector<double>& a, const std::vector<double>& b,
                                double rtol, double atol);

// Reads and compares; InputError names the file when a tensor file is malformed or a recorded
// tensor has a dtype the comparison cannot read.
TensorScan scan_tensors(const RunDir& a, const RunDir& b, double rtol, double atol);

}  // namespace parity::compare
