// parity tensors diff A B: two weight (or gradient) files, each in PyTorch's or Flax's names
// and layouts, mapped onto canonical names (interop/param_names.h), then paired and compared
// value by value by compare (compare/tensor_diff.h); this command reads, maps and prints. The
// question a migration asks first: did my converted checkpoint keep every parameter, in the
// right layout? Tensors pair within their group only (params, grads, batch_stats:
// interop/tensor_import.h's split_tensor_groups and map_tensor_groups, which moves a saved
// model's BatchNorm statistics into batch_stats as a run directory records them): a gradient is
// never compared with a parameter of the same name. With --case, a layers model's tensors take
// the case's Flax paths as names (interop/param_names.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <map>
#include <optional>

#include "commands.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/compare/tensor_diff.h"
#include "parity/interop/param_names.h"
#include "parity/interop/tensor_import.h"

#include "numeric_options.h"
namespace parity::cli {
namespace {

// One file of the two, split into its groups (params, grads, batch_stats:
// interop/tensor_import.h) and mapped onto canonical names, its mappings naming the tensors as
// the file does ("grads/0.weight"), group prefix included.
struct Side {
  std::string label;      // "A", "B"
  std::string path;
  std::string kind;       // from-names, params, grads
  std::string kind_flag;  // "--kind-a", to name in hints
  interop::GroupedTensors grouped;
  compare::MappedTensorFile mapped;
};

Side read_side(const std::string& label, const std::string& path, const std::string& naming,
               const std::string& kind, const ModelShapes* layer_model) {
  const std::map<std::string, interop::TensorGroups> kinds = {
      {"from-names", interop::TensorGroups::kFromPrefixesOrModel},
      {"params", interop::TensorGroups::kParams},
      {"grads", interop::TensorGroups::kGrads}};
  Side side{label, path, kind, label == "A" ? "--kind-a" : "--kind-b", {}, {path, {}}};
  side.grouped =
      interop::split_tensor_groups(interop::read_tensor_file(path), kinds.at(kind), path);
  side.mapped.groups = interop::map_tensor_groups(
      side.grouped, interop::param_naming_from_name(naming), path, layer_model, true);
  return side;
}

std::string group_names(const Side& side) {
  std::vector<std::string> names;
  for (const auto& entry : side.mapped.groups) names.push_back(entry.first);
  return fmt::format("{}", fmt::join(names, ", "));
}

// "A: a.npz holds params (...)", and what was set aside.
void print_groups(const Side& side) {
  std::string how = " (by their names' prefixes)";
  if (side.kind != "from-names") {
    how = fmt::format(" ({} {})", side.kind_flag, side.kind);
  } else if (side.grouped.whole_file) {
    how = fmt::format(
        " (a saved model: not every name is under params/ or grads/; pass {} grads if the file "
        "holds gradients)",
        side.kind_flag);
  }
  std::cout << fmt::format("{}: {} holds {}{}\n", side.label, side.path, group_names(side), how);
  for (const std::string& name : side.grouped.set_aside) {
    std::cout << fmt::format("  set aside {}: parity's bookkeeping, not a tensor of the model\n",
                             name);
  }
}

void print_mapping(const std::string& heading, const interop::CanonicalParams& mapped) {
  std::cout << fmt::format("{}, read as {} names\n", heading,
                           interop::param_naming_name(mapped.naming));
  for (const interop::NameMapping& mapping : mapped.mappings) {
    if (mapping.source == mapping.canonical && mapping.note.empty()) continue;
    std::cout << "  " << interop::describe_mapping(mapping) << "\n";
  }
  for (const interop::NameMapping& ignored : mapped.ignored) {
    std::cout << fmt::format("  ignored {}: {}\n", ignored.source, ignored.note);
  }
}

// Each group's mappings and unpaired names, the compared pairs, and the verdict line.
void print_diff(const compare::TensorFileDiff& diff, const Side& a, const Side& b) {
  for (const compare::TensorGroupDiff& group : diff.groups) {
    const interop::CanonicalParams& mapped_a = a.mapped.groups.at(group.group);
    const interop::CanonicalParams& mapped_b = b.mapped.groups.at(group.group);
    print_mapping(fmt::format("{}: A", group.group), mapped_a);
    print_mapping(fmt::format("{}: B", group.group), mapped_b);
    if (!group.names.all_matched()) {
      std::cout << fmt::format("{}: names that do not match\n", group.group)
                << interop::format_unmatched(group.names, "A", &mapped_a, "B", &mapped_b);
    }
  }
  std::cout << fmt::format("{:<28} {:>12} {:>12} {:>10}\n", "tensor", "max |a-b|", "rel L2",
                           "verdict");
  std::vector<std::string> compared_groups;
  for (const compare::TensorGroupDiff& group : diff.groups) {
    compared_groups.push_back(group.group);
    for (const compare::TensorPair& pair : group.pairs) {
      const compare::TensorDelta& delta = pair.delta;
      std::cout << fmt::format("{:<28} {:>12.4g} {:>12.4g} {:>10}\n",
                               group.group + "/" + delta.name, delta.max_abs, delta.rel_l2,
                               delta.within_tolerance ? "within" : "OUTSIDE");
    }
  }
  std::vector<std::string> not_compared;
  for (const std::string& group : diff.groups_only_in_a) {
    not_compared.push_back(fmt::format("{} (only A holds {})", group, group));
  }
  for (const std::string& group : diff.groups_only_in_b) {
    not_compared.push_back(fmt::format("{} (only B holds {})", group, group));
  }
  std::cout << fmt::format(
      "parity tensors diff of {}: {} names matched, {} unmatched, {} of {} compared tensors "
      "outside rtol {} atol {}: {}{}\n",
      fmt::join(compared_groups, " and "), diff.num_matched(), diff.num_unmatched(),
      diff.num_outside(), diff.num_compared(), diff.rtol, diff.atol,
      diff.same() ? "same" : "DIFFERENT",
      not_compared.empty() ? ""
                           : fmt::format("; not compared: {}", fmt::join(not_compared, ", ")));
}

}  // namespace

void register_tensors_command(CLI::App& app, int& exit_status) {
  struct Arguments {
    std::string a, b;
    std::string naming_a = "auto", naming_b = "auto";
    std::string kind_a = "from-names", kind_b = "from-names";
    double rtol = 0, atol = 0;
    std::string case_name;
    std::vector<std::string> overrides;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* tensors = app.add_subcommand("tensors", "Tensor files of real PyTorch and JAX runs");
  tensors->require_subcommand(1);
  CLI::App* diff = tensors->add_subcommand(
      "diff",
      "Map two tensor files (safetensors, .npz, .npy) in PyTorch's or Flax's names onto "
      "canonical names, list what does not match side by side, and compare the values of the "
      "groups (params, grads) both files hold. Exit 0 when every name matches and every value "
      "is within tolerance, 1 when not, 2 bad input (also: no group in common)");
  diff->add_option("a", arguments->a, "the first file")->required();
  diff->add_option("b", arguments->b, "the second file (the reference)")->required();
  const auto namings = CLI::IsMember({"auto", "torch", "flax"});
  diff->add_option("--naming-a", arguments->naming_a, "auto, torch or flax")->check(namings);
  diff->add_option("--naming-b", arguments->naming_b, "auto, torch or flax")->check(namings);
  const auto kinds = CLI::IsMember({"from-names", "params", "grads"});
  const char* kind_help =
      "from-names: grads/... and params/... names say each tensor's group, and a file with "
      "other names is a saved model (params); params or grads: the whole file is that. Only "
      "tensors of the same group are compared";
  diff->add_option("--kind-a", arguments->kind_a, kind_help)->check(kinds);
  diff->add_option("--kind-b", arguments->kind_b, kind_help)->check(kinds);
  diff->add_option("--case", arguments->case_name,
                   "the case both files are of: a layers model's tensors are then named by the "
                   "case's Flax paths (Conv_0/kernel) and paired with its modules in creation "
                   "order; without it, by kind and natural path order (conv0.kernel)");
  diff->add_option("--set", arguments->overrides, "override a case key (with --case)");
  diff->add_option("--rtol", arguments->rtol, "relative tolerance (default 0: exact)")
      ->check(non_negative_number());
  diff->add_option("--atol", arguments->atol, "absolute tolerance (default 0: exact)")
      ->check(non_negative_number());
  diff->callback([arguments, &exit_status] {
    if (arguments->case_name.empty() && !arguments->overrides.empty()) {
      throw InputError("--set overrides a case key: name the case with --case too");
    }
    std::optional<ModelShapes> layer_model;
    if (!arguments->case_name.empty()) {
      const CaseSpec spec = load_case(arguments->case_name, arguments->overrides);
      if (!spec.model.layers.empty()) {
        layer_model = infer_model_shapes(spec.model.layers, spec.model.input);
      }
    }
    const ModelShapes* layers = layer_model ? &*layer_model : nullptr;
    const Side a = read_side("A", arguments->a, arguments->naming_a, arguments->kind_a, layers);
    const Side b = read_side("B", arguments->b, arguments->naming_b, arguments->kind_b, layers);
    print_groups(a);
    print_groups(b);
    const compare::TensorFileDiff judged =
        compare::diff_tensor_files(a.mapped, b.mapped, arguments->rtol, arguments->atol);
    if (judged.groups.empty()) {
      throw InputError(fmt::format(
          "nothing to compare: A ({}) holds {} and B ({}) holds {}; tensors of different groups "
          "are never compared (a gradient is not a parameter). Fix: diff files that hold the "
          "same group, or, if a file whose names are not under params/ or grads/ holds "
          "gradients, say so with --kind-a grads or --kind-b grads",
          a.path, group_names(a), b.path, group_names(b)));
    }
    print_diff(judged, a, b);
    exit_status = judged.same() ? 0 : 1;
  });
}

}  // namespace parity::cli
