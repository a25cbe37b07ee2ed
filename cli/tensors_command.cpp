// parity tensors diff A B: two weight (or gradient) files, each in PyTorch's or Flax's names
// and layouts, mapped onto canonical names (interop/param_names.h) and compared value by value
// (compare/tensor_diff.h). The question a migration asks first: did my converted checkpoint
// keep every parameter, in the right layout?
#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "parity/compare/tensor_diff.h"
#include "parity/interop/param_names.h"
#include "parity/interop/tensor_import.h"

#include "numeric_options.h"
namespace parity::cli {
namespace {

interop::CanonicalParams read_and_map(const std::string& path, const std::string& naming) {
  return interop::to_canonical_params(interop::read_tensor_file(path),
                                      interop::param_naming_from_name(naming), path);
}

void print_mapping(const std::string& label, const std::string& path,
                   const interop::CanonicalParams& mapped) {
  std::cout << fmt::format("{}: {}, read as {} names\n", label, path,
                           interop::param_naming_name(mapped.naming));
  for (const interop::NameMapping& mapping : mapped.mappings) {
    if (mapping.source == mapping.canonical && mapping.note.empty()) continue;
    std::cout << "  " << interop::describe_mapping(mapping) << "\n";
  }
  for (const interop::NameMapping& ignored : mapped.ignored) {
    std::cout << fmt::format("  ignored {}: {}\n", ignored.source, ignored.note);
  }
}

}  // namespace

void register_tensors_command(CLI::App& app, int& exit_status) {
  struct Arguments {
    std::string a, b;
    std::string naming_a = "auto", naming_b = "auto";
    double rtol = 0, atol = 0;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* tensors = app.add_subcommand("tensors", "Tensor files of real PyTorch and JAX runs");
  tensors->require_subcommand(1);
  CLI::App* diff = tensors->add_subcommand(
      "diff",
      "Map two tensor files (safetensors, .npz, .npy) in PyTorch's or Flax's names onto "
      "canonical names, list what does not match side by side, and compare the values. Exit 0 "
      "when every name matches and every value is within tolerance, 1 when not, 2 bad input");
  diff->add_option("a", arguments->a, "the first file")->required();
  diff->add_option("b", arguments->b, "the second file (the reference)")->required();
  const auto namings = CLI::IsMember({"auto", "torch", "flax"});
  diff->add_option("--naming-a", arguments->naming_a, "auto, torch or flax")->check(namings);
  diff->add_option("--naming-b", arguments->naming_b, "auto, torch or flax")->check(namings);
  diff->add_option("--rtol", arguments->rtol, "relative tolerance (default 0: exact)")
      ->check(non_negative_number());
  diff->add_option("--atol", arguments->atol, "absolute tolerance (default 0: exact)")
      ->check(non_negative_number());
  diff->callback([arguments, &exit_status] {
    const interop::CanonicalParams a = read_and_map(arguments->a, arguments->naming_a);
    const interop::CanonicalParams b = read_and_map(arguments->b, arguments->naming_b);
    print_mapping("A", arguments->a, a);
    print_mapping("B", arguments->b, b);
    const interop::NameComparison names = interop::compare_param_names(a.tensors, b.tensors);
    std::cout << interop::format_unmatched(names, "A", &a, "B", &b);
    const std::vector<compare::TensorDelta> deltas = compare::diff_tensor_sets(
        a.tensors, b.tensors, arguments->a, arguments->b, arguments->rtol, arguments->atol);
    size_t num_outside = 0;
    std::cout << fmt::format("{:<28} {:>12} {:>12} {:>10}\n", "tensor", "max |a-b|", "rel L2",
                             "verdict");
    for (const compare::TensorDelta& delta : deltas) {
      num_outside += delta.within_tolerance ? 0 : 1;
      std::cout << fmt::format("{:<28} {:>12.4g} {:>12.4g} {:>10}\n", delta.name, delta.max_abs,
                               delta.rel_l2, delta.within_tolerance ? "within" : "OUTSIDE");
    }
    const bool same = names.all_matched() && num_outside == 0;
    std::cout << fmt::format(
        "parity tensors diff: {} names matched, {} unmatched, {} of {} compared tensors "
        "outside rtol {} atol {}: {}\n",
        names.matched.size(),
        names.only_in_a.size() + names.only_in_b.size() + names.shape_differs.size(), num_outside,
        deltas.size(), arguments->rtol, arguments->atol, same ? "same" : "DIFFERENT");
    exit_status = same ? 0 : 1;
  });
}

}  // namespace parity::cli
