#include "parity/interop/param_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

#include "case_modules.h"
#include "parity/common/error.h"

namespace parity::interop {
namespace {

// How a tensor's head axes appear where they are attention's: Flax's DenseGeneral keeps them
// apart as (H, E/H), torch merges them into one axis of E features (feature h * E/H + d).
enum class Heads {
  kNone,
  kInput,   // query/key/value kernel: (in, H, E/H) or merged (in, E)
  kOutput,  // out kernel: (H, E/H, E) or merged (E, E)
  kBias,    // query/key/value bias: (H, E/H) or merged (E)
};

// One leaf's rule: which canonical leaves it becomes, how its axes move, and what a reader of
// the mapping must know about its values ("" when nothing).
struct LeafRule {
  const char* source_leaf;  // relative to its module: "weight", "out_proj/weight"
  // One canonical leaf, or one per equal block of axis 0: torch's packed in_proj_weight holds
  // the query, key and value rows in that order (torch/nn/functional.py,
  // _in_projection_packed: w.chunk(3)).
  std::vector<const char*> canonical_leaves;
  enum class Layout { kAsIs, kTorchLinear, kTorchConv } layout = Layout::kAsIs;
  Heads heads = Heads::kNone;
  bool statistic = false;  // model state (BatchNorm's running statistics), not a parameter
  const char* note = "";
};

struct KindRules {
  const char* kind;  // canonical module prefix: "dense"; case_modules.cpp names the same kinds
  std::vector<LeafRule> leaves;
};

using Layout = LeafRule::Layout;

const KindRules kTorchDense = {"dense",
                               {{"weight", {"kernel"}, Layout::kTorchLinear}, {"bias", {"bias"}}}};
const KindRules kTorchConv = {"conv",
                              {{"weight", {"kernel"}, Layout::kTorchConv}, {"bias", {"bias"}}}};
const KindRules kTorchLayerNorm = {"layernorm", {{"weight", {"scale"}}, {"bias", {"bias"}}}};
const KindRules kTorchBatchNorm = {"batchnorm",
                                   {{"weight", {"scale"}},
                                    {"bias", {"bias"}},
                                    {"running_mean", {"mean"}, Layout::kAsIs, Heads::kNone, true},
                                    {"running_var",
                                     {"var"},
                                     Layout::kAsIs,
                                     Heads::kNone,
                                     true,
                                     // torch/nn/functional.py batch_norm vs
                                     // flax/linen/normalization.py _compute_stats
                                     "torch's running variance averages the unbiased batch "
                                     "variance, Flax's the biased one; equal only if the writer "
                                     "converted it (docs/model-layers.md)"}}};
// nn.MultiheadAttention (torch/nn/modules/activation.py): in_proj_weight (3E, E) and
// in_proj_bias (3E) packed, or q/k/v_proj_weight ((E, E), (E, kdim), (E, vdim)) when kdim or
// vdim differ from E; out_proj a Linear (E, E), taken with its module.
const KindRules kTorchAttention = {
    "attention",
    {{"in_proj_weight",
      {"query/kernel", "key/kernel", "value/kernel"},
      Layout::kTorchLinear,
      Heads::kInput},
     {"q_proj_weight", {"query/kernel"}, Layout::kTorchLinear, Heads::kInput},
     {"k_proj_weight", {"key/kernel"}, Layout::kTorchLinear, Heads::kInput},
     {"v_proj_weight", {"value/kernel"}, Layout::kTorchLinear, Heads::kInput},
     {"in_proj_bias", {"query/bias", "key/bias", "value/bias"}, Layout::kAsIs, Heads::kBias},
     {"out_proj/weight", {"out/kernel"}, Layout::kTorchLinear, Heads::kOutput},
     {"out_proj/bias", {"out/bias"}}}};
// A Transformer's MLP block: two dense layers, "0/" the first in natural path order.
const KindRules kTorchMlpBlock = {"mlpblock",
                                  {{"0/weight", {"Dense_0/kernel"}, Layout::kTorchLinear},
                                   {"0/bias", {"Dense_0/bias"}},
                                   {"1/weight", {"Dense_1/kernel"}, Layout::kTorchLinear},
                                   {"1/bias", {"Dense_1/bias"}}}};
const KindRules kFlaxDense = {"dense", {{"kernel", {"kernel"}}, {"bias", {"bias"}}}};
const KindRules kFlaxConv = {"conv", {{"kernel", {"kernel"}}, {"bias", {"bias"}}}};
const KindRules kFlaxLayerNorm = {"layernorm", {{"scale", {"scale"}}, {"bias", {"bias"}}}};
const KindRules kFlaxBatchNorm = {"batchnorm",
                                  {{"scale", {"scale"}},
                                   {"bias", {"bias"}},
                                   {"mean", {"mean"}, Layout::kAsIs, Heads::kNone, true},
                                   {"var", {"var"}, Layout::kAsIs, Heads::kNone, true}}};
const KindRules kFlaxEmbed = {"embed", {{"embedding", {"embedding"}}}};
// nn.MultiHeadDotProductAttention (flax/linen/attention.py): DenseGeneral submodules query, key,
// value (features=(num_heads, head_dim): kernel (in, H, E/H), bias (H, E/H)) and out
// (axis=(-2, -1): kernel (H, E/H, E), bias (E)).
const KindRules kFlaxAttention = {"attention",
                                  {{"query/kernel", {"query/kernel"}, Layout::kAsIs, Heads::kInput},
                                   {"key/kernel", {"key/kernel"}, Layout::kAsIs, Heads::kInput},
                                   {"value/kernel", {"value/kernel"}, Layout::kAsIs, Heads::kInput},
                                   {"query/bias", {"query/bias"}, Layout::kAsIs, Heads::kBias},
                                   {"key/bias", {"key/bias"}, Layout::kAsIs, Heads::kBias},
                                   {"value/bias", {"value/bias"}, Layout::kAsIs, Heads::kBias},
                                   {"out/kernel", {"out/kernel"}, Layout::kAsIs, Heads::kOutput},
                                   {"out/bias", {"out/bias"}}}};
// google-research/vision_transformer's MlpBlock (Dense_0, Dense_1), as the case names it.
const KindRules kFlaxMlpBlock = {"mlpblock",
                                 {{"0/kernel", {"Dense_0/kernel"}},
                                  {"0/bias", {"Dense_0/bias"}},
                                  {"1/kernel", {"Dense_1/kernel"}},
                                  {"1/bias", {"Dense_1/bias"}}}};
// A ViT's parameters of their own, in both frameworks' layout (batch first): the class token
// (1, 1, E) (torchvision's VisionTransformer.class_token, timm's cls_token,
// google-research/vision_transformer's cls) and the position embeddings (1, T, E)
// (torchvision's Encoder.pos_embedding, Flax's AddPositionEmbs pos_embedding, timm's pos_embed).
const KindRules kClassToken = {
    "classtoken", {{"class_token", {"cls"}}, {"cls_token", {"cls"}}, {"cls", {"cls"}}}};
const KindRules kPosEmbed = {
    "posembed", {{"pos_embedding", {"pos_embedding"}}, {"pos_embed", {"pos_embedding"}}}};

// Flax attention's submodules (flax/linen/attention.py, MultiHeadDotProductAttention.__call__).
constexpr std::array<const char*, 4> kFlaxAttentionParts = {"query", "key", "value", "out"};

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

// Module path and leaf of a source name; Flax's collection prefix is not part of the path (a
// top-level parameter, "params/cls", has the path "").
std::pair<std::string, std::string> module_and_leaf(const std::string& name, ParamNaming naming) {
  std::vector<std::string> parts = split_name(name);
  const std::string leaf = parts.back();
  parts.pop_back();
  size_t first = 0;
  if (naming == ParamNaming::kFlax && !parts.empty() &&
      (parts.front() == "params" || parts.front() == "batch_stats")) {
    first = 1;
  }
  std::string path;
  for (size_t i = first; i < parts.size(); ++i) path += (path.empty() ? "" : "/") + parts[i];
  return {path, leaf};
}

std::string join_path(const std::string& parent, const std::string& child) {
  return parent.empty() ? child : parent + "/" + child;
}

// "encoder/layers/encoder_layer_0/mlp" for ".../mlp/0"; "" for a top-level module.
std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// "0" for ".../mlp/0".
std::string last_part(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// What the file's names are grouped into and mapped as one: a module's leaves, a parameter of its
// own (a class token), or a module with its submodules (an attention with its projections, an
// MLP block's two dense layers), whose leaves are then keyed "out_proj/weight", "0/weight".
struct Module {
  std::string path;
  std::map<std::string, std::string> leaves;  // leaf -> source name
  const KindRules* rules = nullptr;           // nullptr: no rule covers it
};

const KindRules* own_parameter_kind(const std::string& leaf) {
  for (const KindRules* rules : {&kClassToken, &kPosEmbed}) {
    for (const LeafRule& rule : rules->leaves) {
      if (leaf == rule.source_leaf) return rules;
    }
  }
  return nullptr;
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

// Moves `child`'s leaves into `into`, keyed "<name>/<leaf>", and drops `child`.
void absorb(std::map<std::string, Module>& modules, const std::string& child,
            const std::string& name, Module& into) {
  for (const auto& [leaf, source] : modules.at(child).leaves)
    into.leaves[name + "/" + leaf] = source;
  modules.erase(child);
}

// torch: a module with in_proj_weight or q_proj_weight takes its out_proj. Flax: a module whose
// submodules query, key, value and out all hold parameters becomes one (it holds none itself).
void merge_attention(std::map<std::string, Module>& modules, ParamNaming naming) {
  std::vector<std::string> attention_paths;
  for (const auto& [path, module] : modules) {
    const bool torch_attention =
        naming == ParamNaming::kTorch &&
        (module.leaves.count("in_proj_weight") != 0 || module.leaves.count("q_proj_weight") != 0);
    const bool flax_attention =
        naming == ParamNaming::kFlax && last_part(path) == kFlaxAttentionParts.front() &&
        std::all_of(kFlaxAttentionParts.begin(), kFlaxAttentionParts.end(), [&](const char* part) {
          return modules.count(join_path(parent_of(path), part)) != 0;
        });
    if (torch_attention) attention_paths.push_back(path);
    if (flax_attention) attention_paths.push_back(parent_of(path));
  }
  for (const std::string& path : attention_paths) {
    Module& attention = modules[path];
    attention.path = path;
    if (naming == ParamNaming::kTorch) {
      attention.rules = &kTorchAttention;
      if (modules.count(join_path(path, "out_proj")) != 0) {
        absorb(modules, join_path(path, "out_proj"), "out_proj", attention);
      }
    } else {
      attention.rules = &kFlaxAttention;
      for (const char* part : kFlaxAttentionParts)
        absorb(modules, join_path(path, part), part, attention);
    }
  }
}

bool is_dense(const Module& module) {
  return module.rules != nullptr && std::strcmp(module.rules->kind, "dense") == 0;
}

// (in, out) of a dense module: torch's weight is (out, in), Flax's kernel (in, out).
std::pair<int64_t, int64_t> dense_in_out(const NamedTensors& source, const Module& module,
                                         ParamNaming naming) {
  if (naming == ParamNaming::kTorch) {
    const Shape& shape = source.at(module.leaves.at("weight")).shape;
    return {shape[1], shape[0]};
  }
  const Shape& shape = source.at(module.leaves.at("kernel")).shape;
  return {shape[0], shape[1]};
}

// A module's only two dense children, mapping E -> hidden -> E, become one MLP block (at the
// parent's path, the first in natural order as "0/"): torchvision's mlp.0 and mlp.3 (or
// mlp.linear_1 and linear_2), nn.TransformerEncoderLayer's linear1 and linear2, Flax's
// MlpBlock_i/Dense_0 and Dense_1. A head and its pre_logits (E -> R -> classes) are not one.
// `modules` is in natural path order.
void merge_mlp_blocks(std::vector<Module>& modules, const NamedTensors& source,
                      ParamNaming naming) {
  std::map<std::string, std::vector<size_t>> dense_children;  // parent -> indices
  for (size_t i = 0; i < modules.size(); ++i) {
    if (is_dense(modules[i])) dense_children[parent_of(modules[i].path)].push_back(i);
  }
  std::vector<bool> merged(modules.size(), false);
  std::vector<Module> blocks;
  for (const auto& [parent, children] : dense_children) {
    if (children.size() != 2) continue;
    const Module& first = modules[children[0]];
    const Module& second = modules[children[1]];
    const auto [in, hidden] = dense_in_out(source, first, naming);
    if (dense_in_out(source, second, naming) != std::pair{hidden, in}) continue;
    Module block{parent, {}, naming == ParamNaming::kTorch ? &kTorchMlpBlock : &kFlaxMlpBlock};
    for (size_t k = 0; k < 2; ++k) {
      for (const auto& [leaf, name] : modules[children[k]].leaves) {
        block.leaves[fmt::format("{}/{}", k, leaf)] = name;
      }
      merged[children[k]] = true;
    }
    blocks.push_back(std::move(block));
  }
  for (size_t i = 0; i < modules.size(); ++i) {
    if (!merged[i]) blocks.push_back(std::move(modules[i]));
  }
  modules = std::move(blocks);
}

// The file's modules with their kinds, in natural path order.
std::vector<Module> modules_of(const NamedTensors& source, ParamNaming naming,
                               const CaseModules* case_modules) {
  std::map<std::string, Module> by_path;
  std::vector<Module> modules;
  for (const auto& [name, tensor] : source) {
    auto [path, leaf] = module_and_leaf(name, naming);
    if (const KindRules* rules = own_parameter_kind(leaf)) {
      modules.push_back({path, {{leaf, name}}, rules});
      continue;
    }
    Module& module = by_path[path];
    module.path = path;
    module.leaves[leaf] = name;
  }
  merge_attention(by_path, naming);
  for (auto& [path, module] : by_path) {
    if (module.rules == nullptr) {
      module.rules = resolve_with_case(kind_of(source, module, naming), naming, case_modules);
    }
    modules.push_back(std::move(module));
  }
  const auto in_natural_order = [&] {
    std::stable_sort(modules.begin(), modules.end(),
                     [](const Module& a, const Module& b) { return natural_less(a.path, b.path); });
  };
  in_natural_order();
  // Only where the case has MLP blocks: elsewhere two dense layers are two dense modules.
  if (case_modules != nullptr && case_modules->has_kind("mlpblock")) {
    merge_mlp_blocks(modules, source, naming);
    in_natural_order();
  }
  return modules;
}

// Whether every module of the file is one of the case's, by path: a file of the case's own
// Flax names, mapped by identity.
bool paths_are_the_cases(const std::vector<Module>& modules, const CaseModules& case_modules) {
  return std::all_of(modules.begin(), modules.end(), [&](const Module& module) {
    return case_modules.paths.count(module.path) != 0;
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

// Block `block` of `num_blocks` equal ones along axis 0, and a note naming it ("" for one).
std::pair<HostTensor, std::string> block_of(const HostTensor& tensor, size_t block,
                                            size_t num_blocks) {
  if (num_blocks == 1) return {tensor, ""};
  HostTensor out;
  out.dtype = tensor.dtype;
  out.shape = tensor.shape;
  out.shape[0] /= static_cast<int64_t>(num_blocks);
  const size_t bytes = out.num_bytes();
  const auto begin = tensor.bytes.begin() + static_cast<std::ptrdiff_t>(block * bytes);
  out.bytes.assign(begin, begin + static_cast<std::ptrdiff_t>(bytes));
  const int64_t rows = out.shape[0];
  return {std::move(out),
          fmt::format("[{}:{}] of {}", static_cast<int64_t>(block) * rows,
                      static_cast<int64_t>(block + 1) * rows, shape_to_string(tensor.shape))};
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

int64_t product(Shape::const_iterator begin, Shape::const_iterator end) {
  return std::accumulate(begin, end, int64_t{1}, std::multiplies<>());
}

// An attention tensor's shape with its heads axes merged: (in, E), (E, E), (E).
Shape merged_heads(const Shape& shape, Heads heads) {
  switch (heads) {
    case Heads::kInput:
      return {shape.front(), product(shape.begin() + 1, shape.end())};
    case Heads::kOutput:
      return {product(shape.begin(), shape.end() - 1), shape.back()};
    case Heads::kBias:
      return {product(shape.begin(), shape.end())};
    case Heads::kNone:
      break;
  }
  return shape;
}

// An attention tensor with the case's heads axes when the case's tensor of that name is the same
// once merged; merged otherwise (no case gives the head count, or the tensor is not the case's
// and shows up as a shape mismatch). The note says which, "" when the shape stayed.
std::pair<HostTensor, std::string> with_heads(HostTensor tensor, Heads heads,
                                              const Shape* case_shape) {
  if (heads == Heads::kNone) return {std::move(tensor), ""};
  const Shape merged = merged_heads(tensor.shape, heads);
  const bool split = case_shape != nullptr && merged_heads(*case_shape, heads) == merged;
  const Shape target = split ? *case_shape : merged;
  const std::string why_merged =
      case_shape == nullptr ? "no case gives their count"
                            : fmt::format("the case's tensor is {}", shape_to_string(*case_shape));
  if (target == tensor.shape) {
    return {std::move(tensor), split ? "" : "heads left merged: " + why_merged};
  }
  const std::string from = shape_to_string(tensor.shape);
  tensor.shape = target;  // row-major: merging or splitting adjacent axes moves no element
  return {std::move(tensor),
          split ? fmt::format("heads split: {} -> {}", from, shape_to_string(target))
                : fmt::format("heads merged: {} -> {} ({})", from, shape_to_string(target),
                              why_merged)};
}

// Why `tensor` cannot take `rule` ("" when it can): a malformed file's ranks and sizes.
std::string unfit_for(const HostTensor& tensor, const LeafRule& rule) {
  const Shape& shape = tensor.shape;
  const size_t blocks = rule.canonical_leaves.size();
  if (blocks > 1 && (shape.empty() || shape[0] % static_cast<int64_t>(blocks) != 0)) {
    return fmt::format("a {} tensor is not {} equal blocks along axis 0", shape_to_string(shape),
                       blocks);
  }
  // torch's Linear weight is (out, in); attention's kernels have an input or output axis
  // besides their heads, its biases one axis at least.
  size_t min_rank = 0;
  if (rule.heads == Heads::kBias) min_rank = 1;
  if (rule.heads == Heads::kInput || rule.heads == Heads::kOutput) min_rank = 2;
  const bool wrong_rank =
      rule.layout == Layout::kTorchLinear ? shape.size() != 2 : shape.size() < min_rank;
  if (wrong_rank) {
    return fmt::format("a {} tensor has the wrong rank for a '{}' leaf", shape_to_string(shape),
                       rule.source_leaf);
  }
  return "";
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

// "Residual_0/MultiHeadDotProductAttention_0" and "query/kernel" -> ".../query/kernel"; a
// generic module "attention0" -> "attention0.query.kernel"; a top-level one ("" and "cls") ->
// "cls".
std::string canonical_name(const std::string& module, std::string leaf, char separator) {
  std::replace(leaf.begin(), leaf.end(), '/', separator);
  return module.empty() ? leaf : module + separator + leaf;
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
    throw InputError(
        fmt::format("{}: holds no tensors; there is nothing to map or compare", origin));
  }
  CanonicalParams result;
  result.naming = naming == ParamNaming::kAuto ? detect_naming(source, origin) : naming;
  const std::optional<CaseModules> case_modules =
      layer_model == nullptr ? std::nullopt : std::optional(case_modules_of(*layer_model));
  const CaseModules* in_case = case_modules ? &*case_modules : nullptr;
  const std::vector<Module> modules = modules_of(source, result.naming, in_case);

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
  const bool by_identity = in_case != nullptr && result.naming == ParamNaming::kFlax &&
                           paths_are_the_cases(modules, *in_case);
  std::map<std::string, size_t> next_index;  // per kind
  for (const Module& module : modules) {
    if (module.rules == nullptr) {
      for (const auto& [leaf, name] : module.leaves) {
        keep_unmapped(name, "no rule for a module with these leaves");
      }
      continue;
    }
    const KindRules& rules = *module.rules;
    // The canonical module name and the separator before its leaves.
    std::string canonical_module;
    char separator = '/';
    const size_t index = next_index[rules.kind]++;
    if (by_identity) {
      canonical_module = module.path;
    } else if (in_case != nullptr) {
      const auto found = in_case->by_kind.find(rules.kind);
      const size_t num_in_case = found == in_case->by_kind.end() ? 0 : found->second.size();
      if (index >= num_in_case) {
        for (const auto& [leaf, name] : module.leaves) {
          ignore_counter_or_keep(
              leaf, name,
              fmt::format("'{}' is {} module {} of the file (from 0, in natural path order) but "
                          "the case's model has {} {} modules",
                          module.path, rules.kind, index, num_in_case, rules.kind));
        }
        continue;
      }
      canonical_module = found->second[index];
    } else {
      canonical_module = fmt::format("{}{}", rules.kind, index);
      separator = '.';
    }
    for (const auto& [leaf, name] : module.leaves) {
      const auto rule =
          std::find_if(rules.leaves.begin(), rules.leaves.end(),
                       [&leaf = leaf](const LeafRule& r) { return leaf == r.source_leaf; });
      if (rule == rules.leaves.end()) {
        ignore_counter_or_keep(leaf, name,
                               fmt::format("no '{}' leaf in a {} module", leaf, rules.kind));
        continue;
      }
      check_floating_point(name, source.at(name), origin);
      if (const std::string why = unfit_for(source.at(name), *rule); !why.empty()) {
        keep_unmapped(name, why);
        continue;
      }
      const size_t num_blocks = rule->canonical_leaves.size();
      for (size_t block = 0; block < num_blocks; ++block) {
        const std::string canonical =
            canonical_name(canonical_module, rule->canonical_leaves[block], separator);
        auto [part, block_note] = block_of(source.at(name), block, num_blocks);
        auto [laid_out, layout_note] = to_canonical_layout(part, rule->layout);
        auto [tensor, heads_note] = with_heads(std::move(laid_out), rule->heads,
                                               in_case ? in_case->shape_of(canonical) : nullptr);
        std::string note;
        for (const std::string& part_note :
             {block_note, layout_note, heads_note, std::string(rule->note)}) {
          if (!part_note.empty()) note += (note.empty() ? "" : "; ") + part_note;
        }
        result.mappings.push_back({name, canonical, note});
        if (rule->statistic) result.statistics.insert(canonical);
        result.tensors.emplace(canonical, std::move(tensor));
      }
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
