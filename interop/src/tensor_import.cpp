#include "parity/interop/tensor_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "parity/common/error.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/interop/import_checks.h"

namespace parity::interop {
namespace {

namespace fs = std::filesystem;

constexpr const char* kParamsGroup = "params";
constexpr const char* kGradsGroup = "grads";
constexpr const char* kBatchStatsGroup = "batch_stats";  // BatchNorm's running statistics
// Run directories' per-replica parameter digests (docs/run-dir-format.md): not a tensor of
// the model, set aside when a file's groups are read from its prefixes.
constexpr const char* kBookkeepingGroup = "replicas";
constexpr const char* kImportedTensorsProducer = "import:tensors";

struct SourceFile {
  fs::path path;
  int64_t step = 0;
};

// The files to import, each with its step, in step order.
std::vector<SourceFile> list_sources(const TensorImport& request) {
  if (!fs::is_directory(request.source)) {
    if (!request.step) {
      throw InputError(fmt::format(
          "{}: which step were these tensors saved at? Pass --step N (or import a directory of "
          "step_NNNNNN.safetensors / step_NNNNNN.npz files)",
          request.source.string()));
    }
    check_imported_step(*request.step, "--step",
                        "Fix: pass the 0-based optimizer step the file was saved at");
    return {{request.source, *request.step}};
  }
  if (request.step) {
    throw InputError(fmt::format(
        "--step {}: {} is a directory, whose files name their own steps (step_NNNNNN.*); "
        "drop --step or name one file",
        *request.step, request.source.string()));
  }
  std::vector<SourceFile> sources;
  for (const auto& entry : fs::directory_iterator(request.source)) {
    const std::string name = entry.path().filename().string();
    for (const char* suffix : {".safetensors", ".npz"}) {
      if (const auto step = step_of_tensor_file(name, suffix)) {
        sources.push_back({entry.path(), *step});
      }
    }
  }
  std::sort(sources.begin(), sources.end(),
            [](const SourceFile& a, const SourceFile& b) { return a.step < b.step; });
  for (size_t i = 1; i < sources.size(); ++i) {
    if (sources[i].step == sources[i - 1].step) {
      throw InputError(fmt::format("{} and {} both hold step {}; keep one",
                                   sources[i - 1].path.string(), sources[i].path.string(),
                                   sources[i].step));
    }
  }
  if (sources.empty()) {
    throw InputError(fmt::format(
        "{} holds no step_NNNNNN.safetensors or step_NNNNNN.npz files (what interop/python's "
        "helpers write under tensors/)",
        request.source.string()));
  }
  return sources;
}

// The case's model under canonical names: what each imported group must match.
struct CaseModel {
  NamedTensors params;       // its parameters' names and shapes (values of no meaning)
  NamedTensors batch_stats;  // BatchNorm's statistics, zeros of their shapes; layers models only
  std::optional<ModelShapes> layers;  // a layers model's shapes and Flax names
};

CaseModel case_model(const CaseSpec& spec) {
  CaseModel model;
  // Only names and shapes count here, and they do not depend on the scheme; "torch" is made by
  // ddp_ref, which interop does not link, so the JAX scheme stands in for it.
  CaseSpec any_scheme = spec;
  any_scheme.init.scheme = "jax-normal";
  model.params = init_model_params(any_scheme);
  if (spec.model.layers.empty()) return model;
  model.layers = infer_model_shapes(spec.model.layers, spec.model.input);
  for (const ModelTensor& tensor : model.layers->batch_stats) {
    model.batch_stats.emplace(tensor.name, HostTensor::zeros(DType::F32, tensor.shape));
  }
  return model;
}

// Moves `params`' statistics, tensors and mappings, into `batch_stats`.
void move_statistics(CanonicalParams& params, CanonicalParams& batch_stats,
                     const std::string& origin) {
  for (const std::string& name : params.statistics) {
    if (batch_stats.tensors.count(name) != 0) {
      throw InputError(
          fmt::format("{}: '{}' is both among the parameters (a saved model's statistic) and under "
                      "'batch_stats/'; keep one",
                      origin, name));
    }
    batch_stats.tensors.insert(params.tensors.extract(name));
    batch_stats.statistics.insert(name);
  }
  const auto statistic = [&](const NameMapping& mapping) {
    return params.statistics.count(mapping.canonical) != 0;
  };
  std::copy_if(params.mappings.begin(), params.mappings.end(),
               std::back_inserter(batch_stats.mappings), statistic);
  params.mappings.erase(std::remove_if(params.mappings.begin(), params.mappings.end(), statistic),
                        params.mappings.end());
  params.statistics.clear();
}

// Appends the mappings `all` does not list yet: a step's params and grads map alike.
void add_new_mappings(const std::vector<NameMapping>& mappings, std::vector<NameMapping>& all) {
  for (const NameMapping& mapping : mappings) {
    const bool listed = std::any_of(all.begin(), all.end(), [&](const NameMapping& known) {
      return known.source == mapping.source && known.canonical == mapping.canonical;
    });
    if (!listed) all.push_back(mapping);
  }
}

}  // namespace

NamedTensors read_tensor_file(const fs::path& path) {
  const std::string extension = path.extension().string();
  NamedTensors tensors;
  if (extension == ".safetensors") {
    tensors = read_safetensors(path).tensors;
  } else if (extension == ".npz") {
    tensors = read_npz(path);
  } else if (extension == ".npy") {
    tensors.emplace(path.stem().string(), read_npy(path));
  } else {
    throw InputError(fmt::format(
        "{}: parity reads tensors from .safetensors, .npz (np.savez) and .npy files; save them "
        "in one of those (torch.save's pickles cannot be read safely)",
        path.string()));
  }
  if (tensors.empty()) {
    throw InputError(fmt::format(
        "{}: holds no tensors, so there is nothing to import or compare; save the model's "
        "parameters (or gradients) into it, e.g. np.savez(path, **arrays) with a non-empty "
        "dict",
        path.string()));
  }
  return tensors;
}

GroupedTensors split_tensor_groups(const NamedTensors& tensors, TensorGroups groups,
                                   const fs::path& path) {
  GroupedTensors result;
  if (groups == TensorGroups::kParams || groups == TensorGroups::kGrads) {
    result.whole_file = true;
    result.groups[groups == TensorGroups::kParams ? kParamsGroup : kGradsGroup] = tensors;
    return result;
  }
  // The prefix of each name ("" for none), and whether any name is a gradient.
  const auto prefix_of = [](const std::string& name) {
    const size_t slash = name.find('/');
    return slash == std::string::npos ? std::string() : name.substr(0, slash);
  };
  const auto is_group = [](const std::string& prefix) {
    return prefix == kParamsGroup || prefix == kGradsGroup || prefix == kBatchStatsGroup;
  };
  bool all_prefixed = true, any_grads = false, any_batch_stats = false;
  for (const auto& [name, tensor] : tensors) {
    const std::string prefix = prefix_of(name);
    all_prefixed &= is_group(prefix) || prefix == kBookkeepingGroup;
    any_grads |= prefix == kGradsGroup;
    any_batch_stats |= prefix == kBatchStatsGroup;
  }
  // Without gradients, "params/" beside "batch_stats/" is Flax's variables dict: one saved model,
  // as a torch state_dict holds its parameters and buffers together.
  if (groups == TensorGroups::kFromPrefixesOrModel && !any_grads &&
      (!all_prefixed || any_batch_stats)) {
    result.whole_file = true;
    result.groups[kParamsGroup] = tensors;
    return result;
  }
  for (const auto& [name, tensor] : tensors) {
    const std::string prefix = prefix_of(name);
    if (prefix == kBookkeepingGroup) {
      result.set_aside.push_back(name);
    } else if (is_group(prefix)) {
      result.groups[prefix].emplace(name.substr(prefix.size() + 1), tensor);
    } else {
      throw InputError(fmt::format(
          "{}: tensor '{}' is under none of 'params/', 'grads/', 'batch_stats/'{}; name the "
          "groups so, or say what the whole file holds with --kind params or --kind grads "
          "(tensors diff: --kind-a, --kind-b)",
          path.string(), name,
          any_grads ? ", while others are under 'grads/' (a file mixing gradients with names of "
                      "no group cannot be split)"
                    : ""));
    }
  }
  if (result.groups.empty()) {
    throw InputError(fmt::format(
        "{}: holds only parity's bookkeeping ({}) and no 'params/', 'grads/' or 'batch_stats/' "
        "tensor; name a file that holds the model's parameters or gradients",
        path.string(), fmt::join(result.set_aside, ", ")));
  }
  return result;
}

std::map<std::string, CanonicalParams> map_tensor_groups(const GroupedTensors& grouped,
                                                         ParamNaming naming, const fs::path& path,
                                                         const ModelShapes* layer_model,
                                                         bool name_groups) {
  std::map<std::string, CanonicalParams> mapped;
  for (const auto& [group, tensors] : grouped.groups) {
    CanonicalParams& canonical = mapped[group] = to_canonical_params(
        tensors, naming, fmt::format("{} ({})", path.string(), group), layer_model);
    if (!name_groups || grouped.whole_file) continue;
    for (auto* list : {&canonical.mappings, &canonical.unmapped, &canonical.ignored}) {
      for (NameMapping& mapping : *list) mapping.source = group + "/" + mapping.source;
    }
  }
  const auto params = mapped.find(kParamsGroup);
  if (params == mapped.end() || params->second.statistics.empty()) return mapped;
  if (mapped.count(kBatchStatsGroup) == 0) {
    mapped[kBatchStatsGroup].naming = params->second.naming;
  }
  CanonicalParams& batch_stats = mapped.at(kBatchStatsGroup);
  move_statistics(params->second, batch_stats, fmt::format("{} ({})", path.string(), kParamsGroup));
  if (params->second.tensors.empty()) {  // statistics alone: its counters go with them
    batch_stats.ignored.insert(batch_stats.ignored.end(), params->second.ignored.begin(),
                               params->second.ignored.end());
    mapped.erase(params);
  }
  return mapped;
}

// "0 to 19", "0, 5, 10", "none": the steps a run holds, for a message.
std::string describe_steps(const std::vector<int64_t>& steps) {
  if (steps.empty()) return "none";
  if (steps.back() - steps.front() + 1 == static_cast<int64_t>(steps.size())) {
    return steps.size() == 1 ? std::to_string(steps.front())
                             : fmt::format("{} to {}", steps.front(), steps.back());
  }
  constexpr size_t kShown = 20;
  const std::vector<int64_t> shown(steps.begin(),
                                   steps.begin() + static_cast<std::ptrdiff_t>(
                                                       std::min(kShown, steps.size())));
  return fmt::format("{}{}", fmt::join(shown, ", "), steps.size() > kShown ? ", ..." : "");
}

// Tensors of a step the run did not record would be read by nobody (compare pairs tensors with
// the run's steps): refused, naming the steps the run holds.
void check_steps_in_run(const std::vector<SourceFile>& sources, const TensorImport& request,
                        const RunDir& run) {
  std::vector<int64_t> held;
  for (const StepMetrics& step : run.steps) held.push_back(step.step);
  for (const SourceFile& source : sources) {
    if (std::binary_search(held.begin(), held.end(), source.step)) continue;
    const std::string what = request.step ? fmt::format("--step {}", source.step)
                                          : fmt::format("{} (step {})", source.path.string(),
                                                        source.step);
    throw InputError(fmt::format(
        "{}: the run directory {} holds no step {} (its metrics.jsonl holds steps {}); import "
        "tensors saved at one of the run's steps, or import the metrics of the whole run first",
        what, request.run_dir.string(), source.step, describe_steps(held)));
  }
}

TensorImportSummary import_tensors(const CaseSpec& spec, const TensorImport& request) {
  const RunDir run = read_run_dir(request.run_dir);
  if (run.info.case_hash != spec.hash()) {
    throw InputError(fmt::format(
        "{} holds a run of case {} (hash {}), not of case {} (hash {}) with these overrides; "
        "import the tensors into the run directory of the same case",
        request.run_dir.string(), run.info.case_name, run.info.case_hash, spec.name, spec.hash()));
  }
  const CaseModel model = case_model(spec);

  TensorImportSummary summary;
  std::map<int64_t, NamedTensors> steps;  // step -> tensors to write, run-directory names
  std::string unmatched;
  const std::vector<SourceFile> sources = list_sources(request);
  check_steps_in_run(sources, request, run);
  for (const SourceFile& source : sources) {
    const NamedTensors tensors = read_tensor_file(source.path);
    const GroupedTensors grouped = split_tensor_groups(tensors, request.groups, source.path);
    const std::map<std::string, CanonicalParams> mapped_groups = map_tensor_groups(
        grouped, request.naming, source.path, model.layers ? &*model.layers : nullptr, false);
    for (const auto& [group, mapped] : mapped_groups) {
      if (summary.mappings.empty()) summary.naming = mapped.naming;
      if (&source == &sources.front()) add_new_mappings(mapped.mappings, summary.mappings);
      const NameComparison names = compare_param_names(
          mapped.tensors, group == kBatchStatsGroup ? model.batch_stats : model.params);
      if (!names.all_matched()) {
        unmatched +=
            fmt::format("{} ({}), step {}:\n{}", source.path.string(), group, source.step,
                        format_unmatched(names, "file", &mapped, "case " + spec.name, nullptr));
        continue;
      }
      for (const auto& [name, tensor] : mapped.tensors) {
        steps[source.step].emplace(group + "/" + name, tensor);
        ++summary.num_tensors;
      }
    }
  }
  if (!unmatched.empty()) {
    throw InputError(fmt::format(
        "the tensors do not map onto case {}'s parameters; nothing was written.\n{}"
        "Fix: save the model the case describes, or pass --naming torch|flax if the names "
        "were read as the wrong framework's",
        spec.name, unmatched));
  }

  for (auto& [step, tensors] : steps) {
    const fs::path path = step_tensors_path(request.run_dir, step);
    if (fs::exists(path)) {
      for (auto& [name, tensor] : read_safetensors(path).tensors) {
        if (tensors.count(name) != 0 && !request.overwrite) {
          throw InputError(
              fmt::format("{} already holds '{}' at step {}; pass --overwrite to replace it",
                          path.string(), name, step));
        }
        tensors.emplace(name, std::move(tensor));
      }
    }
  }
  for (const auto& [step, tensors] : steps) {
    fs::create_directories(step_tensors_path(request.run_dir, step).parent_path());
    write_safetensors(step_tensors_path(request.run_dir, step), tensors,
                      {{"step", std::to_string(step)}, {"producer", kImportedTensorsProducer}});
    summary.steps.push_back(step);
  }
  return summary;
}

}  // namespace parity::interop
