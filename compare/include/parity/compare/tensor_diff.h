// Two sets of named tensors (say, two weight files mapped onto canonical names) compared value
// by value the way compare judges a run's recorded tensors: max |a - b|, relative L2, cosine,
// norm ratio and the tolerance test of tolerance.h.
//
// Two tensor files, each split into its groups (params, grads, batch_stats) and mapped onto
// canonical names (interop/tensor_import.h map_tensor_groups), are judged as `parity tensors
// diff` judges them: groups pair by name only (a gradient is never compared with a parameter of
// the same name), canonical names pair within a group, and every pair of the same shape is
// compared value by value.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "parity/common/host_tensor.h"
#include "parity/compare/result.h"
#include "parity/interop/param_names.h"

namespace parity::compare {

// One delta per name both sets hold with the same shape, in name order (names held by one set
// only, or with another shape, are the caller's to report). `label_a` and `label_b` name the
// sets in errors: tensors must be F32 or F64.
std::vector<TensorDelta> diff_tensor_sets(const NamedTensors& a, const NamedTensors& b,
                                          const std::string& label_a, const std::string& label_b,
                                          double rtol, double atol);

// One tensor file on canonical names, as map_tensor_groups gives it.
struct MappedTensorFile {
  std::string path;
  std::map<std::string, interop::CanonicalParams> groups;  // "params", "grads", "batch_stats"
};

// A canonical name both files hold with the same shape, compared.
struct TensorPair {
  // How each file's tensor came by the canonical name: its name in the file and the mapping's
  // note (what was done to the values, or why no rule covered the name); the canonical name
  // and no note for a tensor that already had it.
  interop::NameMapping mapping_a, mapping_b;
  Shape shape;
  TensorDelta delta;  // name: the canonical name; the figures and whether within tolerance
};

// One group both files hold.
struct TensorGroupDiff {
  std::string group;
  // Which canonical names paired; those that did not (one file only, or another shape) are the
  // unpaired names.
  interop::NameComparison names;
  std::vector<TensorPair> pairs;  // the names paired, in name order
};

struct TensorFileDiff {
  // The groups both files hold, in name order; none when they hold no group in common.
  std::vector<TensorGroupDiff> groups;
  // Groups one file holds only, not compared.
  std::vector<std::string> groups_only_in_a, groups_only_in_b;
  double rtol = 0, atol = 0;

  size_t num_matched() const;    // names paired, over every group
  size_t num_unmatched() const;  // names in one file only or with another shape
  size_t num_compared() const;   // pairs compared
  size_t num_outside() const;    // pairs outside tolerance
  // Every name paired and every pair within tolerance.
  bool same() const { return num_unmatched() == 0 && num_outside() == 0; }
};

// Pairs and compares; InputError as diff_tensor_sets for a tensor neither F32 nor F64, naming its
// file.
TensorFileDiff diff_tensor_files(const MappedTensorFile& a, const MappedTensorFile& b,
                                 double rtol, double atol);

}  // namespace parity::compare
