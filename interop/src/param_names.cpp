#include "parity/interop/param_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <optional>

#include "case_modules.h"
#include "parity/common/error.h"

namespace parity::interop {
namespace {

// A module's parameters by leaf name ("weight", "kernel", ...) -> source name.
struct Module {
  std::string path;
  std::map<std::string, std::string> leaves;
};

// One leaf's rule: which canonical leaf it becomes, how its axes move, and what a reader of
// the mapping must know about its values ("" when nothing).
struct LeafRule {
  const char* source_leaf;
  const char* canonical_leaf;
  enum class Layout { kAsIs, kTorchLinear, kTorchConv } layout;
  const char* note = "";
};

struct KindRules {
  const char* kind;  // canonical module prefix: "dense"
  std::vector<LeafRule> leaves;
};

using Layout = LeafRule::Layout;

const KindRules kTorchDense = {
    "dense", {{"weight", "kernel", Layout::kTorchLinear}, {"bias", "bias", Layout::kAsIs}}};
const KindRules kTorchConv = {
    "conv", {{"weight", "kernel", Layout::kTorchConv}, {"bias", "bias", Layout::kAsIs}}};
const KindRules kTorchLayerNorm = {
    "layernorm", {{"weight", "scale", Layout::kAsIs}, {"bias", "bias", Layout::kAsIs}}};
const KindRules kTorchBatchNorm = {"batchnorm",
                                   {{"weight", "scale", Layout::kAsIs},
                                    {"bias", "bias", Layout::kAsIs},
                                    {"running_mean", "mean", Layout::kAsIs},
                                    {"running_var", "var", Layout::kAsIs,
                                     // torch/nn/functional.py batch_norm vs
                                     // flax/linen/normalization.py _compute_stats
                                     "torch's running variance averages the unbiased batch "
                                     "variance, Flax's the biased one; equal only if the writer "
                                     "converted it (docs/model-layers.md)"}}};
const KindRules kFlaxDense = {
    "dense", {{"kernel", "kernel", Layout::kAsIs}, {"bias", "bias", Layout::kAsIs}}};
const KindRules kFlaxConv = {
    "conv", {{"kernel", "kernel", Layout::kAsIs}, {"bias", "bias", Layout::kAsIs}}};
const KindRules kFlaxLayerNorm = {
    "layernorm", {{"scale", "scale", Layout::kAsIs}, {"bias", "bias", Layout::kAsIs}}};
const KindRules kFlaxBatchNorm = {"batchnorm",
                                  {{"scale", "scale", Layout::kAsIs},
                                   {"bias", "bias", Layout::kAsIs},
                                   {"mean", "mean", Layout::kAsIs},
                                   {"var", "var", Layout::kAsIs}}};
const KindRules kFlaxEmbed = {"embed", {{"embedding", "embedding", Layout::kAsIs}}};

// torch's BatchNorm counter of batches seen: state, not a parameter, and Flax has no twin.
constexpr const char* kTorchIgnoredLeaf = "num_batches_tracked";

std::vector<std::string> split_name(const std::string& name) {
  std::vector<std::string> parts;
  std::string current;
  for (char c : name) {
    if (c == '.' || c == '/') {
      parts.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  parts.push_back(current);
  return parts;
}

// Natural order: runs of digits compare as numbers, so "layers.2" < "layers.10".
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool digit_a = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    const bool digit_b = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (digit_a && digit_b) {
      size_t end_a = i, end_b = j;
      while (end_a < a.size() && std::isdigit(static_cast<unsigned char>(a[end_a]))) ++end_a;
      while (end_b < b.size() && std::isdigit(static_cast<unsigned char>(b[end_b]))) ++end_b;
      // Compare digit runs by value: strip leading zeros, then length, then digits.
      size_t start_a = i, start_b = j;
      while (start_a + 1 < end_a && a[start_a] == '0') ++start_a;
      while (start_b + 1 < end_b && b[start_b] == '0') ++start_b;
      if (end_a - start_a != end_b - start_b) return end_a - start_a < end_b - start_b;
      const int order = a.compare(start_a, end_a - start_a, b, start_b, end_b - start_b);
      if (order != 0) return order < 0;
      i = end_a;
      j = end_b;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

ParamNaming detect_naming(const NamedTensors& source, const std::string& origin) {
  bool torch = false, flax = false;
  for (const auto& [name, tensor] : source) {
    const std::string leaf = split_name(name).back();
    torch |= leaf == "weight" || leaf == "running_mean";
    // mean and var: a batch_stats collection, which has no other leaf.
    flax |= leaf == "kernel" || leaf == "scale" || leaf == "embedding" || leaf == "mean" ||
            leaf == "var";
  }
  if (torch != flax) return torch ? ParamNaming::kTorch : ParamNaming::kFlax;
  throw InputError(fmt::format(
      "{}: cannot tell whether the names are PyTorch's or Flax's ({}); pass --naming torch "
      "or --naming flax",
      origin,
      torch ? "both 'weight' and 'kernel'/'scale' leaves appear"
            : "no 'weight', 'running_mean', 'kernel', 'scale', 'embedding', 'mean' or 'var' "
              "leaf"));
}

// Module path and leaf of a source name; Flax's collection prefix is not part of the path.
std::pair<std::string, std::string> module_and_leaf(const std::string& name, ParamNaming naming) {
  std::vector<std::string> parts = split_name(name);
  const std::string leaf = parts.back();
  parts.pop_back();
  size_t first = 0;
  if (naming == ParamNaming::kFlax && parts.size() > 1 &&
      (parts.front() == "params" || parts.front() == "batch_stats")) {
    first = 1;
  }
  std::string path;
  for (size_t i = first; i < parts.size(); ++i) path += (path.empty() ? "" : "/") + parts[i];
  return {path, leaf};
}

size_t rank_of(const NamedTensors& source, const Module& module, const char* leaf) {
  return source.at(module.leaves.at(leaf)).shape.size();
}

const KindRules* kind_of(const NamedTensors& source, const Module& module, ParamNaming naming) {
  auto has = [&](const char* leaf) { return module.leaves.count(leaf) != 0; };
  if (naming == ParamNaming::kTorch) {
    // A BatchNorm's buffers alone: the batch_stats group of parity_torch_log's files.
    if (!has("weight")) return has("running_mean") ? &kTorchBatchNorm : nullptr;
    const size_t rank = rank_of(source, module, "weight");
    if (rank == 2) return &kTorchDense;
    if (rank >= 3 && rank <= 5) return &kTorchConv;
    if (rank == 1) return has("running_mean") ? &kTorchBatchNorm : &kTorchLayerNorm;
    return nullptr;
  }
  if (has("kernel")) {
    const size_t rank = rank_of(source, module, "kernel");
    if (rank == 2) return &kFlaxDense;
    if (rank >= 3 && rank <= 5) return &kFlaxConv;
    return nullptr;
  }
  if (has("embedding")) return &kFlaxEmbed;
  if (has("scale") || has("mean")) return has("mean") ? &kFlaxBatchNorm : &kFlaxLayerNorm;
  return nullptr;
}

// A norm module's parameters without running statistics (a gradient file, a model saved without
// buffers) read as LayerNorm; in a case that has BatchNorm and no LayerNorm they are BatchNorm's.
const KindRules* resolve_with_case(const KindRules* rules, ParamNaming naming,
                                   const CaseModules* case_modules) {
  if (rules == nullptr || case_modules == nullptr || std::strcmp(rules->kind, "layernorm") != 0 ||
      case_modules->has_kind("layernorm") || !case_modules->has_kind("batchnorm")) {
    return rules;
  }
  return naming == ParamNaming::kTorch ? &kTorchBatchNorm : &kFlaxBatchNorm;
}

// Whether every module of the file is one of the case's, by path: a file of the case's own
// Flax names, mapped by identity.
bool paths_are_the_cases(const std::vector<const Module*>& modules,
                         const CaseModules& case_modules) {
  return std::all_of(modules.begin(), modules.end(), [&](const Module* module) {
    return case_modules.paths.count(module->path) != 0;
  });
}

// Moves axes: out.shape[i] = in.shape[order[i]].
HostTensor permute_axes(const HostTensor& in, const std::vector<size_t>& order) {
  const size_t rank = in.shape.size();
  HostTensor out;
  out.dtype = in.dtype;
  for (size_t axis : order) out.shape.push_back(in.shape[axis]);
  out.bytes.resize(in.bytes.size());
  std::vector<size_t> in_strides(rank, 1);  // in elements
  for (size_t axis = rank; axis-- > 1;) {
    in_strides[axis - 1] = in_strides[axis] * static_cast<size_t>(in.shape[axis]);
  }
  const size_t item = dtype_num_bytes(in.dtype);
  std::vector<size_t> index(rank, 0);  // over out's axes
  const size_t count = in.num_elements();
  for (size_t flat_out = 0; flat_out < count; ++flat_out) {
    size_t flat_in = 0;
    for (size_t axis = 0; axis < rank; ++axis) flat_in += index[axis] * in_strides[order[axis]];
    std::memcpy(out.bytes.data() + flat_out * item, in.bytes.data() + flat_in * item, item);
    for (size_t axis = rank; axis-- > 0;) {
      if (++index[axis] < static_cast<size_t>(out.shape[axis])) break;
      index[axis] = 0;
    }
  }
  return out;
}

// The tensor in canonical layout, and a note of what moved ("" when nothing did).
std::pair<HostTensor, std::string> to_canonical_layout(const HostTensor& tensor, Layout layout) {
  const size_t rank = tensor.shape.size();
  if (layout == Layout::kTorchLinear) {
    return {permute_axes(tensor, {1, 0}), "transposed: torch (out, in) -> (in, out)"};
  }
  if (layout == Layout::kTorchConv) {
    std::vector<size_t> order;
    for (size_t axis = 2; axis < rank; ++axis) order.push_back(axis);
    order.push_back(1);
    order.push_back(0);
    return {permute_axes(tensor, order), "axes moved: torch (out, in, k...) -> (k..., in, out)"};
  }
  return {tensor, ""};
}

// Parameters and gradients are compared as numbers (compare/tensor_diff.h reads F32 and F64);
// an integer or boolean tensor is not one, and F16/BF16 ones must be widened first.
void check_floating_point(const std::string& name, const HostTensor& tensor,
                          const std::string& origin) {
  if (tensor.dtype == DType::F32 || tensor.dtype == DType::F64) return;
  throw InputError(fmt::format(
      "{}: tensor '{}' is {}; parameters and gradients must be floating point, F32 or F64, to "
      "be compared. Save them as float32 (torch: tensor.float(); numpy/JAX: "
      "np.asarray(x, np.float32)){}",
      origin, name, dtype_name(tensor.dtype),
      tensor.dtype == DType::F16 || tensor.dtype == DType::BF16
          ? ""
          : ", or leave out what is not a parameter"));
}

}  // namespace

std::string param_naming_name(ParamNaming naming) {
  switch (naming) {
    case ParamNaming::kTorch:
      return "torch";
    case ParamNaming::kFlax:
      return "flax";
    case ParamNaming::kAuto:
      break;
  }
  return "auto";
}

std::string describe_mapping(const NameMapping& mapping) {
  return fmt::format("{} <- {}{}", mapping.canonical, mapping.source,
                     mapping.note.empty() ? "" : " (" + mapping.note + ")");
}

ParamNaming param_naming_from_name(const std::string& name) {
  for (ParamNaming naming : {ParamNaming::kAuto, ParamNaming::kTorch, ParamNaming::kFlax}) {
    if (param_naming_name(naming) == name) return naming;
  }
  throw InputError(fmt::format("naming '{}' is not known; expected auto, torch or flax", name));
}

CanonicalParams to_canonical_params(const NamedTensors& source, ParamNaming naming,
                                    const std::string& origin, const ModelShapes* layer_model) {
  if (source.empty()) {
    throw InputError(fmt::format("{}: holds no tensors; there is nothing to map or compare",
                                 origin));
  }
  CanonicalParams result;
  result.naming = naming == ParamNaming::kAuto ? detect_naming(source, origin) : naming;
  std::map<std::string, Module> modules;
  for (const auto& [name, tensor] : source) {
    auto [path, leaf] = module_and_leaf(name, result.naming);
    Module& module = modules[path];
    module.path = path;
    module.leaves[leaf] = name;
  }
  std::vector<const Module*> ordered;
  for (const auto& [path, module] : modules) ordered.push_back(&module);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Module* a, const Module* b) { return natural_less(a->path, b->path); });

  auto keep_unmapped = [&](const std::string& name, const std::string& why) {
    check_floating_point(name, source.at(name), origin);
    result.unmapped.push_back({name, name, why});
    result.tensors.emplace(name, source.at(name));
  };
  // torch's BatchNorm counter is set aside wherever it appears; other leaves are kept.
  auto ignore_counter_or_keep = [&](const std::string& leaf, const std::string& name,
                                    const std::string& why) {
    if (result.naming == ParamNaming::kTorch && leaf == kTorchIgnoredLeaf) {
      result.ignored.push_back({name, "", "BatchNorm's batch counter; Flax keeps none"});
    } else {
      keep_unmapped(name, why);
    }
  };
  const std::optional<CaseModules> case_modules =
      layer_model == nullptr ? std::nullopt : std::optional(case_modules_of(*layer_model));
  const bool by_identity = case_modules && result.naming == ParamNaming::kFlax &&
                           paths_are_the_cases(ordered, *case_modules);
  std::map<std::string, size_t> next_index;  // per kind
  for (const Module* module : ordered) {
    const KindRules* rules =
        resolve_with_case(kind_of(source, *module, result.naming), result.naming,
                          case_modules ? &*case_modules : nullptr);
    if (rules == nullptr) {
      for (const auto& [leaf, name] : module->leaves) {
        keep_unmapped(name, "no rule for a module with these leaves");
      }
      continue;
    }
    // The canonical module name and the separator before its leaf.
    std::string prefix;
    const size_t index = next_index[rules->kind]++;
    if (by_identity) {
      prefix = module->path + "/";
    } else if (case_modules) {
      const auto found = case_modules->by_kind.find(rules->kind);
      const size_t num_in_case = found == case_modules->by_kind.end() ? 0 : found->second.size();
      if (index >= num_in_case) {
        for (const auto& [leaf, name] : module->leaves) {
          ignore_counter_or_keep(
              leaf, name,
              fmt::format("'{}' is {} module {} of the file (from 0, in natural path order) but "
                          "the case's model has {} {} modules",
                          module->path, rules->kind, index, num_in_case, rules->kind));
        }
        continue;
      }
      prefix = found->second[index] + "/";
    } else {
      prefix = fmt::format("{}{}.", rules->kind, index);
    }
    for (const auto& [leaf, name] : module->leaves) {
      const auto rule =
          std::find_if(rules->leaves.begin(), rules->leaves.end(),
                       [&leaf = leaf](const LeafRule& r) { return leaf == r.source_leaf; });
      if (rule == rules->leaves.end()) {
        ignore_counter_or_keep(leaf, name,
                               fmt::format("no '{}' leaf in a {} module", leaf, rules->kind));
        continue;
      }
      const std::string canonical = prefix + rule->canonical_leaf;
      check_floating_point(name, source.at(name), origin);
      auto [tensor, note] = to_canonical_layout(source.at(name), rule->layout);
      if (*rule->note != '\0') note += (note.empty() ? "" : "; ") + std::string(rule->note);
      result.mappings.push_back({name, canonical, note});
      result.tensors.emplace(canonical, std::move(tensor));
    }
  }
  return result;
}

NameComparison compare_param_names(const NamedTensors& a, const NamedTensors& b) {
  NameComparison comparison;
  for (const auto& [name, tensor] : a) {
    const auto found = b.find(name);
    if (found == b.end()) {
      comparison.only_in_a.push_back({name, tensor.shape});
    } else if (found->second.shape != tensor.shape) {
      comparison.shape_differs.push_back({name, tensor.shape, found->second.shape});
    } else {
      comparison.matched.push_back(name);
    }
  }
  for (const auto& [name, tensor] : b) {
    if (a.count(name) == 0) comparison.only_in_b.push_back({name, tensor.shape});
  }
  return comparison;
}

namespace {

// "dense0.kernel (784, 256) <- 0.weight", or the name alone when no mapping renamed it.
std::string describe(const std::string& name, const Shape& shape, const CanonicalParams* mapped) {
  std::string text = name + " " + shape_to_string(shape);
  if (mapped == nullptr) return text;
  for (const NameMapping& mapping : mapped->mappings) {
    if (mapping.canonical == name && mapping.source != name) return text + " <- " + mapping.source;
  }
  return text;
}

}  // namespace

std::string format_unmatched(const NameComparison& comparison, const std::string& label_a,
                             const CanonicalParams* mapped_a, const std::string& label_b,
                             const CanonicalParams* mapped_b) {
  if (comparison.all_matched()) return "";
  struct Row {
    std::string a, b, note;
  };
  std::vector<Row> rows;
  for (const ShapeMismatch& mismatch : comparison.shape_differs) {
    rows.push_back({describe(mismatch.name, mismatch.a, mapped_a),
                    describe(mismatch.name, mismatch.b, mapped_b), "shape differs"});
  }
  const size_t num_only = std::max(comparison.only_in_a.size(), comparison.only_in_b.size());
  for (size_t i = 0; i < num_only; ++i) {
    Row row{"-", "-", "only in " + label_a};
    if (i < comparison.only_in_a.size()) {
      const NamedShape& only = comparison.only_in_a[i];
      row.a = describe(only.name, only.shape, mapped_a);
    }
    if (i < comparison.only_in_b.size()) {
      const NamedShape& only = comparison.only_in_b[i];
      row.b = describe(only.name, only.shape, mapped_b);
      row.note = i < comparison.only_in_a.size() ? "only in one" : "only in " + label_b;
    }
    rows.push_back(row);
  }
  size_t width_a = label_a.size(), width_b = label_b.size();
  for (const Row& row : rows) {
    width_a = std::max(width_a, row.a.size());
    width_b = std::max(width_b, row.b.size());
  }
  std::string text = fmt::format("{:<{}} | {:<{}} |\n", label_a, width_a, label_b, width_b);
  text += fmt::format("{:-<{}}-+-{:-<{}}-+\n", "", width_a, "", width_b);
  for (const Row& row : rows) {
    text += fmt::format("{:<{}} | {:<{}} | {}\n", row.a, width_a, row.b, width_b, row.note);
  }
  for (const auto& [label, mapped] : {std::pair{label_a, mapped_a}, std::pair{label_b, mapped_b}}) {
    if (mapped == nullptr) continue;
    for (const NameMapping& unmapped : mapped->unmapped) {
      text += fmt::format("{} '{}' kept its name: {} ({} naming)\n", label, unmapped.source,
                          unmapped.note, param_naming_name(mapped->naming));
    }
  }
  text += fmt::format("{} matched, {} only in {}, {} only in {}, {} with another shape\n",
                      comparison.matched.size(), comparison.only_in_a.size(), label_a,
                      comparison.only_in_b.size(), label_b, comparison.shape_differs.size());
  return text;
}

}  // namespace parity::interop
