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
// named by the file's stem). InputError for another extension, a damaged file, or a file that
// holds no tensor at all (an empty .npz or safetensors file has nothing to import or compare).
NamedTensors read_tensor_file(const std::filesystem::path& path);

// What a file holds. Tensors of different groups are never paired: a gradient is not compared
// with a parameter of the same name.
enum class TensorGroups {
  // Groups under "params/", "grads/" and "batch_stats/" prefixes (what the interop/python
  // helpers write, and the run directory's own files, whose "replicas/" bookkeeping is set
  // aside).
  kFromPrefixes,
  kParams,  // the whole file is the model's parameters (and state: BatchNorm statistics)
  kGrads,   // the whole file is gradients
  // kFromPrefixes when every name carries a prefix; a file with no "grads/" name and names
  // outside "params/" is a saved model (a state_dict, Flax variables {params, batch_stats},
  // parity's init file) and is kParams, BatchNorm statistics included. What `parity tensors
  // diff` reads by default.
  kFromPrefixesOrModel,
};

struct GroupedTensors {
  // "params" / "grads" / "batch_stats" -> that group's tensors, named without the group prefix;
  // never empty.
  std::map<std::string, NamedTensors> groups;
  bool whole_file = false;             // one group, by --kind or as a saved model
  std::vector<std::string> set_aside;  // parity's bookkeeping (replicas/param_digests)
};

// Splits `tensors` (read from `path`) into groups. InputError naming the file and tensor for a
// name under no group where prefixes are required, and for a file holding nothing but
// bookkeeping.
GroupedTensors split_tensor_groups(const NamedTensors& tensors, TensorGroups groups,
                                   const std::filesystem::path& path);

// A file's groups on canonical names: to_canonical_params with `naming` and `layer_model`, each
// group's errors naming "<path> (<group>)". A params group's statistics (BatchNorm's running
// mean and variance, which a saved model holds with its parameters: a state_dict, Flax's
// variables, Flax variables logged as params) move into the batch_stats group, as a run
// directory records them, so that a saved model's statistics pair with a step file's. Mapped
// sources are named as in their group ("0.weight"), or, with `name_groups` and a file split by
// its prefixes, as in the file ("params/0.weight"). InputError when params and batch_stats hold
// the same statistic.
std::map<std::string, CanonicalParams> map_tensor_groups(const GroupedTensors& grouped,
                                                         ParamNaming naming,
                                                         const std::filesystem::path& path,
                                                         const ModelShapes* layer_model,
                                                         bool name_groups);

struct TensorImport {
  // A tensor file, or a directory of step_NNNNNN.safetensors / step_NNNNNN.npz files.
  std::filesystem::path source;
  // The step a single file was saved at; not for a directory. 0 to kMaxImportedStep
  // (import_checks.h).
  std::optional<int64_t> step;
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
  std::vector<NameMapping> mappings;        // of the first file's groups, for the printout
};

// Reads every source file, maps each group onto the case's canonical names and shapes
// (map_tensor_groups; params and grads: the parameters'; batch_stats: BatchNorm's statistics,
// a saved model's included), and only when every
// group of every file matches them exactly writes tensors/step_NNNNNN.safetensors (merged with
// what the run recorded there). Otherwise throws InputError with the unmatched names side by
// side (format_unmatched), writing nothing.
TensorImportSummary import_tensors(const CaseSpec& spec, const TensorImport& request);

}  // namespace parity::interop
