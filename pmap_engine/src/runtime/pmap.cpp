// pmap on the mapped call (runtime/mapped_call.h), as jax/_src/pmap.py implements it on
// shard_map: a one-axis mesh of the first axis-size devices, in_axes and out_axes turned into
// PartitionSpecs with the mapped dimension squeezed, check_vma=False.
//
// Vocabulary:
//   mapped leaf     one with an in_axis: device d receives its slice d along that axis.
//   broadcast leaf  in_axis None: every device receives the whole value (shared storage).
//   axis size       the length of the mapped axes, which must agree between leaves and must
//                   not exceed the device count; devices 0..size-1 run.
#include "pmap_engine/pmap.h"

#include <sstream>

#include "pmap_engine/distributed.h"
#include "pmap_engine/jax_release.h"
#include "pmap_engine/sharding.h"
#include "runtime/mapped_placement.h"

namespace pmap_engine {
namespace {

// The spec that splits dimension `dim` over `axis_name`, squeezed: pmap's view of in_axes or
// out_axes `dim` (jax/_src/shard_map.py _axes_to_pspec).
runtime::LeafSharding mapped_sharding(const std::string& axis_name, std::optional<int64_t> dim) {
  if (!dim) return {};
  std::vector<PartitionSpec::Entry> entries(static_cast<size_t>(*dim));
  entries.push_back({axis_name});
  return {PartitionSpec(std::move(entries)), dim};
}

// in_axes normalised against the leaf's rank.
int64_t normalised_in_axis(int64_t axis, const Array& leaf, size_t argnum,
                           const std::string& path) {
  const int64_t rank = leaf.ndim();
  const int64_t normalised = axis < 0 ? axis + rank : axis;
  if (normalised < 0 || normalised >= rank) {
    // jax-v0.4.38 jax/_src/api.py _mapped_axis_size: "pmap was requested to map its argument
    // along axis {axis}, which implies that its rank should be at least {axis + 1}, but is only
    // {rank}". At jax-v0.11.0 pmap no longer calls it (jax/_src/pmap.py _mapped_axis_size reads
    // the first mapped argument's shape only); the engine keeps this check in both modes.
    throw EngineError("pmap was requested to map its argument along axis " + std::to_string(axis) +
                      ", which implies that its rank should be at least " +
                      std::to_string(axis < 0 ? -axis : axis + 1) + ", but is only " +
                      std::to_string(rank) + " (its shape is " + shape_to_string(leaf.shape()) +
                      "): argument " + std::to_string(argnum) +
                      (path.empty() ? "" : " at " + path) +
                      ". Give it a device axis or use in_axes None to broadcast it.");
  }
  return normalised;
}

runtime::MappedFunctionOptions mapped_function_options(const PmapOptions& options) {
  runtime::MappedFunctionOptions mapped;
  mapped.what = "pmap";
  mapped.static_argnums = options.static_broadcasted_argnums;
  mapped.donate_argnums = options.donate_argnums;
  mapped.check_replicated_outputs = options.check_replicated_outputs;
  return mapped;
}

class PmapPlacement : public Mapped::Placement {
 public:
  PmapPlacement(TreeFunction function, PmapOptions options)
      : Placement(runtime::MappedFunction(std::move(function), mapped_function_options(options))),
        options_(std::move(options)),
        devices_(options_.devices ? *options_.devices : DeviceSet::from_environment()) {}

  Layout layout(const std::vector<Tree>& args) const override {
    const auto axes = leaf_axes(args);
    const int64_t local_size = mapped_size(args, axes);
    // jax/_src/pmap.py: with several processes each passes its local devices' part, and the
    // mapped axis spans local_axis_size * process_count devices, grouped by process.
    std::optional<runtime::ProcessSpan> span;
    if (distributed::is_initialized() && distributed::process_count() > 1) {
      span = runtime::ProcessSpan{distributed::process_count(),
                                  distributed::process_index() * local_size};
    }
    return {mesh(local_size), in_shardings(axes), out_shardings(), span};
  }

 private:
  PmapOptions options_;
  DeviceSet devices_;

  bool is_static(size_t a) const { return options_.static_broadcasted_argnums.count(a) > 0; }

  // Each dynamic argument's per-leaf axes (normalised), static arguments empty.
  std::vector<std::vector<std::optional<int64_t>>> leaf_axes(const std::vector<Tree>& args) const {
    if (!options_.in_axes.empty() && options_.in_axes.size() != args.size()) {
      AxisSpec::tuple(options_.in_axes).broadcast_over(Tree::tuple(args), "pmap in_axes");
    }
    std::vector<std::vector<std::optional<int64_t>>> axes(args.size());
    for (size_t a = 0; a < args.size(); ++a) {
      if (is_static(a)) continue;
      const AxisSpec spec = options_.in_axes.empty() ? AxisSpec(0) : options_.in_axes[a];
      axes[a] = spec.broadcast_over(args[a], "pmap in_axes");
      const std::vector<Array> leaves = args[a].leaves();
      const std::vector<std::string> paths = args[a].leaf_paths();
      for (size_t i = 0; i < leaves.size(); ++i) {
        if (axes[a][i]) axes[a][i] = normalised_in_axis(*axes[a][i], leaves[i], a, paths[i]);
      }
    }
    return axes;
  }

  int64_t mapped_size(const std::vector<Tree>& args,
                      const std::vector<std::vector<std::optional<int64_t>>>& axes) const {
    std::vector<std::string> lines;
    std::optional<int64_t> size;
    bool consistent = true;
    for (size_t a = 0; a < args.size(); ++a) {
      const std::vector<Array> leaves = args[a].leaves();
      const std::vector<std::string> paths = args[a].leaf_paths();
      for (size_t i = 0; i < axes[a].size(); ++i) {
        if (!axes[a][i]) continue;
        const int64_t length = leaves[i].shape()[static_cast<size_t>(*axes[a][i])];
        lines.push_back("  * argument " + std::to_string(a) +
                        (paths[i].empty() ? "" : " at " + paths[i]) + " has shape " +
                        shape_to_string(leaves[i].shape()) + " and axis " +
                        std::to_string(*axes[a][i]) + " is to be mapped");
        if (size && *size != length) consistent = false;
        if (!size) size = length;
      }
    }
    if (!size) {
      // jax-v0.4.38 jax/_src/api.py _mapped_axis_size;
      // jax-v0.11.0 jax/_src/pmap.py _mapped_axis_size.
      throw EngineError(jax_release() == JaxRelease::kV0_4_38
                            ? "pmap must have at least one non-None value in in_axes"
                            : "pmap requires at least one argument with a mapped axis.");
    }
    if (!consistent) {
      // jax-v0.4.38 jax/_src/api.py _mapped_axis_size: "pmap got inconsistent sizes for array
      // axes to be mapped:" followed by one line per argument (the engine's lines, not JAX's).
      // At jax-v0.11.0 pmap takes the first mapped argument's size and the others fail jit's or
      // shard_map's checks; the engine keeps this check in both modes.
      std::ostringstream out;
      out << "pmap got inconsistent sizes for array axes to be mapped:\n";
      for (const auto& line : lines) out << line << "\n";
      throw EngineError(out.str());
    }
    if (*size > devices_.size()) refuse_more_than_devices(args, axes, *size);
    return *size;
  }

  // A mapped axis longer than the device count (pitfall P6: 65 on 8).
  //
  // jax-v0.4.38: pmap compiles for `size` devices and jax/_src/interpreters/pxla.py
  // UnloadedPmapExecutable.from_hlo refuses more than there are.
  //
  // jax-v0.11.0: jax/_src/pmap.py _get_mesh_devices slices the devices to [:size], so the mesh
  // is all 8 of them; _cached_shard_map jits the shard_map with in_shardings
  // NamedSharding(mesh, P(None, ..., axis_name)), and jit's pjit_check_aval_sharding
  // (jax/_src/pjit.py) refuses the first flat argument whose mapped axis 8 does not divide,
  // naming it by _fun's parameter (`flat_args[k]`, jax/_src/api_util.py
  // _non_static_arg_names). When 8 divides them all (64 on 8), each device's block keeps
  // size/8 rows and _fun's lax.squeeze of the mapped axis fails (jax/_src/lax/lax.py
  // _compute_squeeze_shape), on the first mapped flat argument.
  [[noreturn]] void refuse_more_than_devices(
      const std::vector<Tree>& args, const std::vector<std::vector<std::optional<int64_t>>>& axes,
      int64_t size) const {
    const std::string hint =
        " (pmap_engine: pmap maps the leading axis onto devices: reshape the global batch to "
        "(devices, per_device_batch, ...), so its length must be a multiple of the device "
        "count; PyTorch's DistributedSampler pads instead; pitfall P6)";
    const int64_t count = devices_.size();
    if (jax_release() == JaxRelease::kV0_4_38) {
      throw EngineError("compiling computation that requires " + std::to_string(size) +
                        " logical devices, but only " + std::to_string(count) +
                        " XLA devices are available (num_replicas=" + std::to_string(size) +
                        ")" + hint);
    }
    const Mesh all_devices(devices_, {{options_.axis_name, count}});
    std::optional<std::pair<Shape, int64_t>> first_mapped;  // its shape and mapped axis
    size_t flat_index = 0;
    for (size_t a = 0; a < args.size(); ++a) {
      const std::vector<Array> leaves = args[a].leaves();
      for (size_t i = 0; i < axes[a].size(); ++i, ++flat_index) {
        if (!axes[a][i]) continue;
        const Shape& shape = leaves[i].shape();
        if (!first_mapped) first_mapped = {{shape, *axes[a][i]}};
        try {
          NamedSharding(all_devices, mapped_sharding(options_.axis_name, axes[a][i]).spec)
              .check_leaf(shape, "pjit arguments with pytree key path flat_args[" +
                                     std::to_string(flat_index) + "]");
        } catch (const EngineError& error) {
          throw EngineError(error.what() + hint);
        }
      }
    }
    Shape block = first_mapped->first;
    const auto axis = static_cast<size_t>(first_mapped->second);
    block[axis] /= count;
    throw EngineError(
        "cannot select an axis to squeeze out which has size not equal to one, got shape=" +
        python_tuple(block) + " and dimensions=(" + std::to_string(axis) + ",)" + hint);
  }

  runtime::InShardings in_shardings(
      const std::vector<std::vector<std::optional<int64_t>>>& axes) const {
    runtime::InShardings in(axes.size());
    for (size_t a = 0; a < axes.size(); ++a) {
      for (const auto& axis : axes[a]) in[a].push_back(mapped_sharding(options_.axis_name, axis));
    }
    return in;
  }

  runtime::OutShardings out_shardings() const {
    return [this](const Tree& output) {
      const AxisSpec spec = options_.out_axes.empty()       ? AxisSpec(0)
                            : options_.out_axes.size() == 1 ? options_.out_axes.front()
                                                            : AxisSpec::tuple(options_.out_axes);
      const std::vector<std::optional<int64_t>> axes = spec.broadcast_over(output, "pmap out_axes");
      const std::vector<Array> leaves = output.leaves();
      std::vector<runtime::LeafSharding> shardings;
      for (size_t o = 0; o < axes.size(); ++o) {
        std::optional<int64_t> axis = axes[o];
        // A negative out_axis counts from the end of the output, device axis included.
        if (axis && *axis < 0) axis = *axis + leaves[o].ndim() + 1;
        shardings.push_back(mapped_sharding(options_.axis_name, axis));
      }
      return shardings;
    };
  }

  Mesh mesh(int64_t size) const { return Mesh(devices_, {{options_.axis_name, size}}); }
};

}  // namespace

Pmapped::Pmapped(TreeFunction function, PmapOptions options)
    : Mapped(std::make_shared<PmapPlacement>(std::move(function), std::move(options))) {}

Pmapped pmap(TreeFunction function, PmapOptions options) {
  return Pmapped(std::move(function), std::move(options));
}

}  // namespace pmap_engine
