#include "runtime/mapped_call.h"

#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "ir/axis_env.h"
#include "runtime/device_blocks.h"
#include "runtime/executor.h"
#include "runtime/program_cache.h"

namespace pmap_engine::runtime {
namespace {

std::string leaf_name(const std::vector<std::string>& paths, size_t o) {
  return paths[o].empty() ? std::to_string(o) : paths[o];
}

// The top-level output each leaf of `output` belongs to: its tuple position, or 0.
std::vector<size_t> top_level_positions(const Tree& output) {
  std::vector<size_t> positions;
  if (output.kind() != Tree::Kind::kTuple) {
    positions.assign(output.leaves().size(), 0);
    return positions;
  }
  for (size_t c = 0; c < output.children().size(); ++c) {
    positions.insert(positions.end(), output.children()[c].leaves().size(), c);
  }
  return positions;
}

// The first element where `other` differs from `reference` bit for bit, or nullopt.
std::optional<size_t> first_difference(const Buffer& reference, const Buffer& other) {
  if (reference.bytes == other.bytes ||
      std::memcmp(reference.bytes->data(), other.bytes->data(), reference.num_bytes()) == 0) {
    return std::nullopt;  // the common case, in one pass
  }
  const size_t element_bytes = dtype_num_bytes(reference.dtype);
  for (size_t i = 0; i < reference.num_elements(); ++i) {
    if (std::memcmp(reference.bytes->data() + i * element_bytes,
                    other.bytes->data() + i * element_bytes, element_bytes) != 0) {
      return i;
    }
  }
  return std::nullopt;
}

std::string element_pair(const Buffer& a, const Buffer& b, size_t at) {
  std::ostringstream out;
  out << Array(a).to_doubles()[at] << " vs " << Array(b).to_doubles()[at];
  return out.str();
}

// pmap's debug check: outputs meant to be replicated (parameters after a synchronised update)
// must be bit-identical on every device (pitfalls P4, P11).
void check_replicated(const std::vector<std::vector<Buffer>>& per_device, const Tree& output,
                      const std::set<size_t>& checked) {
  if (checked.empty()) return;
  const std::vector<size_t> positions = top_level_positions(output);
  const std::vector<std::string> paths = output.leaf_paths();
  for (size_t o = 0; o < positions.size(); ++o) {
    if (!checked.count(positions[o])) continue;
    for (size_t d = 1; d < per_device.size(); ++d) {
      std::optional<size_t> at = first_difference(per_device[0][o], per_device[d][o]);
      if (!at) continue;
      throw EngineError("replication check: output " + leaf_name(paths, o) +
                        " differs between device 0 and device " + std::to_string(d) +
                        " (first at element " + std::to_string(*at) + ": " +
                        element_pair(per_device[0][o], per_device[d][o], *at) +
                        "). The replicas have diverged: reduce gradients (pmean) before the "
                        "update and initialise parameters once, then broadcast them (pitfalls "
                        "P4, P11).");
    }
  }
}

// The device whose block stands for device p's: the same coordinates on the axes the output
// is split over, coordinate 0 on the others.
int64_t representative(const Mesh& mesh, uint64_t split_axes, int64_t device) {
  int64_t flat = 0;
  for (size_t a = 0; a < mesh.axes().size(); ++a) {
    const int64_t coordinate = (split_axes >> a) & 1 ? mesh.coordinate(device, a) : 0;
    flat = flat * mesh.axes()[a].size + coordinate;
  }
  return flat;
}

// The mesh axes whose bits `axes` sets, in mesh order.
ir::VaryingAxes axis_list(const Mesh& mesh, uint64_t axes) {
  ir::VaryingAxes names;
  for (size_t a = 0; a < mesh.axes().size(); ++a) {
    if ((axes >> a) & 1) names.push_back(mesh.axes()[a].name);
  }
  return names;
}

std::string axis_names(const Mesh& mesh, uint64_t axes) {
  std::string names;
  for (const std::string& name : axis_list(mesh, axes)) {
    names += (names.empty() ? "'" : ", '") + name + "'";
  }
  return names;
}

// The mesh's axes as the program sees them: across processes, the one mapped axis spans every
// process's devices.
std::vector<MeshAxis> global_axes(const Mesh& mesh, const ProcessSpan* span) {
  std::vector<MeshAxis> axes = mesh.axes();
  if (span == nullptr) return axes;
  if (axes.size() != 1) {
    throw EngineError("a mapped call across processes needs a one-axis mesh (pmap); got " +
                      mesh.to_string());
  }
  axes.front().size *= span->processes;
  return axes;
}

// Where a leaf's blocks live and how they cut it: the mesh's axes and devices (and, across
// processes, the span), the leaf's sharding and its global shape. An argument left on the
// devices by an earlier call under the same key is passed on block by block.
std::string blocks_key(const Mesh& mesh, const LeafSharding& sharding, const Shape& global,
                       const ProcessSpan* span) {
  std::string key = mesh.to_string();
  for (const Device& device : mesh.devices()) key += " " + device.to_string();
  if (span) key += " of " + std::to_string(span->processes) + " processes";
  key += " | " + sharding.spec.to_string();
  if (sharding.squeezed_dim) key += " squeezed " + std::to_string(*sharding.squeezed_dim);
  return key + " | " + shape_to_string(global);
}

bool distinct_storage(const DeviceBlocks& resident) {
  std::set<const ByteStorage*> storages;
  for (const Buffer& block : resident.blocks()) storages.insert(block.bytes.get());
  return storages.size() == resident.blocks().size();
}

}  // namespace

struct MappedFunction::State {
  TreeFunction function;
  MappedFunctionOptions options;
  ProgramCache cache;
  mutable std::mutex mutex;  // guards `last`
  MappedExecutionStats last;

  std::vector<std::vector<BlockLayout>> input_layouts(const Mesh& mesh,
                                                      const std::vector<Tree>& args,
                                                      const InShardings& in) const {
    std::vector<std::vector<BlockLayout>> layouts(args.size());
    for (size_t a = 0; a < args.size(); ++a) {
      if (options.static_argnums.count(a)) continue;
      const std::vector<Array> leaves = args[a].leaves();
      const std::vector<std::string> paths = args[a].leaf_paths();
      for (size_t i = 0; i < leaves.size(); ++i) {
        const std::string where = options.what + " argument " + std::to_string(a) +
                                  (paths[i].empty() ? "" : " at " + paths[i]);
        layouts[a].emplace_back(mesh, in.at(a).at(i), leaves[i].shape(), where);
      }
    }
    return layouts;
  }

  std::string signature(const Mesh& mesh, const std::vector<Tree>& args, const InShardings& in,
                        const ProcessSpan* span) const {
    std::ostringstream out;
    out << mesh.to_string() << (span ? "x" + std::to_string(span->processes) : "") << "|";
    for (const auto& argument : in) {
      for (const auto& leaf : argument) {
        out << leaf.spec.to_string()
            << (leaf.squeezed_dim ? "~" + std::to_string(*leaf.squeezed_dim) : "") << ";";
      }
      out << "|";
    }
    return out.str() + call_signature(args, options.static_argnums);
  }

  TracedFunction trace(const Mesh& mesh, const std::vector<Tree>& args,
                       const std::vector<std::vector<BlockLayout>>& layouts,
                       const OutShardings& out, const ProcessSpan* span = nullptr) const {
    std::vector<std::unique_ptr<ir::ScopedAxis>> bound;
    for (const MeshAxis& axis : global_axes(mesh, span)) {
      bound.push_back(std::make_unique<ir::ScopedAxis>(axis.name, axis.size, options.check_vma));
    }
    // Under check_vma each argument varies along the axes its in_spec names.
    InputVarying input_varying;
    if (options.check_vma) {
      input_varying = [&](size_t a, size_t i) {
        return axis_list(mesh, layouts[a][i].named_axes());
      };
    }
    TracedFunction traced = trace_function(
        function, args, options.static_argnums,
        [&](size_t a, size_t i, const Array&) { return layouts[a][i].device_shape(); },
        options.what, input_varying);
    if (options.check_vma) check_output_replication(mesh, traced, out);
    return traced;
  }

  // shard_map's check_vma: every output must be invariant along the mesh axes its out_spec
  // leaves out, by the types the trace gave it (ir/varying_axes.h).
  void check_output_replication(const Mesh& mesh, const TracedFunction& traced,
                                const OutShardings& out) const {
    const std::vector<LeafSharding> shardings = out(traced.output);
    const std::vector<std::string> paths = traced.output.leaf_paths();
    for (size_t o = 0; o < shardings.size(); ++o) {
      const BlockLayout layout = BlockLayout::for_output(
          mesh, shardings[o],
          traced.program.vars[static_cast<size_t>(traced.program.outputs[o])].shape,
          options.what + " output " + leaf_name(paths, o));
      uint64_t varying = 0;
      for (const std::string& axis :
           traced.program.vars[static_cast<size_t>(traced.program.outputs[o])].varying) {
        varying |= uint64_t{1} << mesh.axis_position(axis);
      }
      const uint64_t unproven = varying & ~layout.named_axes();
      if (unproven == 0) continue;
      // jax/_src/shard_map.py (_check_reps / _spec_rank_error family): out_specs that require
      // replication which can't be statically inferred given the mesh.
      throw EngineError(options.what +
                        " applied to the function was given out_specs which "
                        "require replication which can't be statically inferred given the "
                        "mesh " +
                        mesh.to_string() + ": output " + leaf_name(paths, o) +
                        " has "
                        "out_specs " +
                        shardings[o].spec.to_string() +
                        ", which implies it is "
                        "replicated across mesh axis " +
                        axis_names(mesh, unproven) +
                        ", but it varies along it. Reduce it over that axis first (psum, pmean, "
                        "all_gather), name the axis in out_specs, or pass check_vma=false");
    }
  }

  // Device p's inputs: the blocks of split leaves (the ones an earlier call left on the
  // devices under the same layout, else fresh copies), shared storage of unsplit ones.
  std::vector<std::vector<Buffer>> per_device_inputs(
      const Mesh& mesh, const std::vector<Tree>& args, const InShardings& in,
      const std::vector<std::vector<BlockLayout>>& layouts, const ProcessSpan* span,
      std::vector<bool>& donated) const {
    std::vector<std::vector<Buffer>> per_device(static_cast<size_t>(mesh.size()));
    for (size_t a = 0; a < args.size(); ++a) {
      if (options.static_argnums.count(a)) continue;
      const bool donate = options.donate_argnums.count(a) > 0;
      std::vector<Array> leaves = args[a].leaves();
      for (size_t i = 0; i < leaves.size(); ++i) {
        const BlockLayout& layout = layouts[a][i];
        const DeviceBlocks* resident = leaves[i].device_blocks();
        const bool reuse = resident != nullptr &&
                           resident->layout_key() ==
                               blocks_key(mesh, in[a][i], layout.global_shape(), span);
        if (reuse) {
          for (int64_t d = 0; d < mesh.size(); ++d) {
            per_device[static_cast<size_t>(d)].push_back(
                resident->blocks()[static_cast<size_t>(d)]);
          }
        } else {
          const Buffer& source = leaves[i].buffer(options.what.c_str());
          for (int64_t d = 0; d < mesh.size(); ++d) {
            per_device[static_cast<size_t>(d)].push_back(
                layout.is_split() ? layout.extract(source, d) : source);
          }
        }
        // A donated leaf's blocks are the program's to overwrite; the caller's array is
        // deleted, as a donated jax.Array is. Storage several devices share (a host array
        // passed whole, or one buffer a kernel gave every device) is not: devices run
        // concurrently, and one could write what another still reads.
        donated.push_back(donate && (reuse ? distinct_storage(*resident) : layout.is_split()));
        if (donate) leaves[i].donate_device_blocks();
      }
    }
    return per_device;
  }

  // The global value of output o from every device's block.
  Array assemble(const Mesh& mesh, const std::vector<std::vector<Buffer>>& per_device, size_t o,
                 const LeafSharding& sharding, const std::string& name,
                 const ProcessSpan* span) const {
    const Buffer& first = per_device[0][o];
    const BlockLayout layout =
        BlockLayout::for_output(mesh, sharding, first.shape, options.what + " output " + name);
    const uint64_t all_axes = (uint64_t{1} << mesh.axes().size()) - 1;
    const uint64_t replicated = all_axes & ~layout.named_axes();
    if (replicated && !options.check_vma && !options.replicated_by_construction) {
      for (int64_t d = 0; d < mesh.size(); ++d) {
        const int64_t r = representative(mesh, layout.named_axes(), d);
        const std::optional<size_t> at = first_difference(per_device[static_cast<size_t>(r)][o],
                                                          per_device[static_cast<size_t>(d)][o]);
        if (!at) continue;
        throw EngineError(options.what + ": output " + name +
                          " is returned without a device "
                          "axis along mesh axis " +
                          axis_names(mesh, replicated) +
                          " (out_axes "
                          "None / out_specs " +
                          sharding.spec.to_string() +
                          ") but differs "
                          "between device " +
                          std::to_string(r) + " and device " + std::to_string(d) +
                          " (first at element " + std::to_string(*at) +
                          "); only values that are the same on every device (after psum or "
                          "pmean) can be returned without a device axis");
      }
    }
    // Each device keeps its own block, a replicated output's whole value included, as a
    // jax.Array replicated over devices holds one buffer on each; passed back under the same
    // layout, a donated leaf is then updated in place on every device. The global value is
    // stitched from the representatives' blocks only when read.
    std::vector<Buffer> blocks;
    for (int64_t d = 0; d < mesh.size(); ++d) {
      blocks.push_back(per_device[static_cast<size_t>(d)][o]);
    }
    // The closure keeps its own mesh and rebuilds the layout from it when the value is read:
    // a BlockLayout points at the mesh it was made with, which this call's caller owns.
    const bool whole = !layout.is_split() && !sharding.squeezed_dim;
    auto assemble = [mesh, sharding, whole, device_shape = first.shape,
                     what = options.what + " output " + name](const std::vector<Buffer>& parts) {
      if (whole) return parts.front();  // device 0's copy is the value
      const BlockLayout output = BlockLayout::for_output(mesh, sharding, device_shape, what);
      Buffer global = Buffer::allocate_uninitialized(parts.front().dtype, output.global_shape());
      for (int64_t d = 0; d < mesh.size(); ++d) {
        if (representative(mesh, output.named_axes(), d) != d) continue;
        output.insert(parts[static_cast<size_t>(d)], d, global);
      }
      return global;
    };
    auto resident = std::make_shared<DeviceBlocks>(
        std::move(blocks), blocks_key(mesh, sharding, layout.global_shape(), span),
        std::move(assemble));
    return Array::on_devices(std::move(resident), first.dtype, layout.global_shape());
  }
};

MappedFunction::MappedFunction(TreeFunction function, MappedFunctionOptions options)
    : state_(std::make_shared<State>()) {
  state_->function = std::move(function);
  state_->options = std::move(options);
}

Tree MappedFunction::operator()(const Mesh& mesh, const std::vector<Tree>& args,
                                const InShardings& in, const OutShardings& out,
                                const ProcessSpan* span) const {
  require_executable(mesh.devices());
  State& state = *state_;
  const auto layouts = state.input_layouts(mesh, args, in);
  const TracedFunction& compiled =
      state.cache.get(state.signature(mesh, args, in, span),
                      [&] { return state.trace(mesh, args, layouts, out, span); });

  std::vector<bool> donated;
  std::vector<std::vector<Buffer>> per_device =
      state.per_device_inputs(mesh, args, in, layouts, span, donated);
  MappedExecutionResult result = execute_mapped(compiled.executable->program,
                                                std::move(per_device), donated,
                                                global_axes(mesh, span), span);
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.last.peak_bytes_per_device = result.peak_bytes_per_device;
    state.last.peak_footprint_bytes_per_device = result.peak_footprint_bytes_per_device;
    state.last.num_ops = static_cast<int64_t>(compiled.program.equations.size());
    state.last.num_collectives = result.num_collectives;
    state.last.donated_reuses = result.donated_reuses;
  }
  check_replicated(result.per_device_outputs, compiled.output,
                   state.options.check_replicated_outputs);

  const std::vector<LeafSharding> shardings = out(compiled.output);
  const std::vector<std::string> paths = compiled.output.leaf_paths();
  std::vector<Array> outputs;
  for (size_t o = 0; o < shardings.size(); ++o) {
    outputs.push_back(
        state.assemble(mesh, result.per_device_outputs, o, shardings[o], leaf_name(paths, o),
                       span));
  }
  return compiled.output.unflatten(outputs);
}

std::string MappedFunction::program_text(const Mesh& mesh, const std::vector<Tree>& args,
                                         const InShardings& in, const OutShardings& out) const {
  return traced_program(mesh, args, in, out).to_string();
}

ir::Program MappedFunction::traced_program(const Mesh& mesh, const std::vector<Tree>& args,
                                           const InShardings& in, const OutShardings& out) const {
  return state_->trace(mesh, args, state_->input_layouts(mesh, args, in), out).program;
}

CacheStats MappedFunction::cache_stats() const { return state_->cache.stats(); }

MappedExecutionStats MappedFunction::last_execution() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->last;
}

}  // namespace pmap_engine::runtime
