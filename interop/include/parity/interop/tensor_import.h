// Gradients and parameters that real training scripts saved (safetensors, .npz, .npy), in
// PyTorch's or Flax's names and layouts, written into a run directory as its recorded steps
// under the canonical names (param_names.h), so that compare judges them tensor by tensor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/host_tensor.h"
#include "parity/interop/param_names.h"

namespace parity::interop {

// A file's tensors under its own names: .safetensors; .npz (np.load's names); .npy (one tensor
// named by the file's stem). InputError for another extension or a damaged file.
NamedTensors read_tensor_file(const std::filesystem::path& path);

// What a file holds: both groups under "params/" and "grads/" prefixes (what the
// interop/python helpers write, and the run directory's own files), or one group only.
enum class TensorGroups { kFromPrefixes, kParams, kGrads };

struct TensorImport {
  // A tensor file, or a directory of step_NNNNNN.safetensors / step_NNNNNN.npz files.
  std::filesystem::path source;
  std::optional<int64_t> step;  // the step a single file was saved at; not for a directory
  TensorGroups groups = TensorGroups::kFromPrefixes;
  ParamNaming naming = ParamNaming::kAuto;
  // An existing run directory of the same case (`parity import metrics` made it).
  std::filesystem::path run_dir;
  bool overwrite = false;  // replace tensors the run already recorded under the same names
};

struct TensorImportSummary {
  std::vector<int64_t> steps;
  size_t num_tensors = 0;                   // imported, over all steps
  ParamNaming naming = ParamNaming::kAuto;  // as read, per the first group
  std::vector<NameMapping> mappings;        // of the first group, for the printout
};

// Reads every source file, maps each group onto the case's canonical parameter names and
// shapes, and only when every group of every file matches them exactly writes
// tensors/step_NNNNNN.safetensors (merged with what the run recorded there). Otherwise throws
// InputError with the unmatched names side by side (format_unmatched), writing nothing.
TensorImportSummary import_tensors(const CaseSpec& spec, const TensorImport& request);

}  // namespace parity::interop
