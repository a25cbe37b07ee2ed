// pmap: trace the per-device function once per signature, then run it on every device of the
// mapped axis in lockstep (runtime::execute_mapped).
//
// Vocabulary:
//   mapped argument     one with an in_axis: device d receives its slice d along that axis.
//   broadcast argument  in_axis None: every device receives the whole value (shared storage).
//   axis size           the length of the mapped axes, which must agree between arguments and
//                       must not exceed the device count; devices 0..size-1 run.
//   out_axis            0: the devices' values are stacked on a new leading axis; None: the
//                       value must be the same on every device, and is returned once.
#include "pmap_engine/pmap.h"

#include <cstring>
#include <mutex>
#include <sstream>

#include "ir/axis_env.h"
#include "ir/trace.h"
#include "runtime/executor.h"
#include "runtime/program_cache.h"

namespace pmap_engine {
namespace {

// The byte layout of slicing axis `axis` of a row-major array: `outer` blocks of `axis_size`
// slices, each slice `inner_bytes` long.
struct AxisLayout {
  size_t outer = 1;
  size_t axis_size = 1;
  size_t inner_bytes = 0;
};

AxisLayout layout_of(const Shape& shape, int64_t axis, DType dtype) {
  AxisLayout layout;
  layout.inner_bytes = dtype_num_bytes(dtype);
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const size_t size = static_cast<size_t>(shape[static_cast<size_t>(d)]);
    if (d < axis) layout.outer *= size;
    if (d == axis) layout.axis_size = size;
    if (d > axis) layout.inner_bytes *= size;
  }
  return layout;
}

Shape without_axis(Shape shape, int64_t axis) {
  shape.erase(shape.begin() + axis);
  return shape;
}

// Device d's slice of `source` along `axis`.
Buffer take_slice(const Buffer& source, int64_t axis, size_t d) {
  Buffer slice = Buffer::allocate_uninitialized(source.dtype, without_axis(source.shape, axis));
  const AxisLayout layout = layout_of(source.shape, axis, source.dtype);
  const auto* from = reinterpret_cast<const std::byte*>(source.bytes->data());
  auto* to = reinterpret_cast<std::byte*>(slice.bytes->data());
  for (size_t o = 0; o < layout.outer; ++o) {
    std::memcpy(to + o * layout.inner_bytes, from + (o * layout.axis_size + d) * layout.inner_bytes,
                layout.inner_bytes);
  }
  return slice;
}

// The devices' values stacked on a new leading axis.
Buffer stack(const std::vector<Buffer>& per_device) {
  Shape shape = per_device.front().shape;
  shape.insert(shape.begin(), static_cast<int64_t>(per_device.size()));
  Buffer out = Buffer::allocate_uninitialized(per_device.front().dtype, shape);
  const size_t num_bytes = per_device.front().num_bytes();
  for (size_t d = 0; d < per_device.size(); ++d) {
    std::memcpy(out.bytes->data() + d * num_bytes, per_device[d].bytes->data(), num_bytes);
  }
  return out;
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

// The first element where device d's value differs from device 0's, or nullopt.
std::optional<size_t> first_difference(const Buffer& reference, const Buffer& other) {
  if (std::memcmp(reference.bytes->data(), other.bytes->data(), reference.num_bytes()) == 0) {
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
      const std::vector<double> first = Array(per_device[0][o]).to_doubles();
      const std::vector<double> other = Array(per_device[d][o]).to_doubles();
      std::ostringstream out;
      out << "replication check: output " << (paths[o].empty() ? std::to_string(o) : paths[o])
          << " differs between device 0 and device " << d << " (first at element " << *at << ": "
          << first[*at] << " vs " << other[*at]
          << "). The replicas have diverged: reduce gradients (pmean) before the update and "
             "initialise parameters once, then broadcast them (pitfalls P4, P11).";
      throw EngineError(out.str());
    }
  }
}

std::string describe_in_axes(const std::vector<std::optional<int64_t>>& in_axes) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < in_axes.size(); ++i) {
    out << (i ? ", " : "") << (in_axes[i] ? std::to_string(*in_axes[i]) : "None");
  }
  out << (in_axes.size() == 1 ? ",)" : ")");
  return out.str();
}

}  // namespace

struct Pmapped::State {
  TreeFunction function;
  PmapOptions options;
  DeviceSet devices{1};
  runtime::ProgramCache cache;
  mutable std::mutex mutex;  // guards `last`
  MappedExecutionStats last;

  bool is_static(size_t a) const { return options.static_broadcasted_argnums.count(a) > 0; }

  std::optional<int64_t> in_axis(size_t a) const {
    if (is_static(a)) return std::nullopt;
    return options.in_axes.empty() ? std::optional<int64_t>(0) : options.in_axes[a];
  }

  // The normalised in_axis of every leaf of argument a (checked against its rank).
  std::optional<int64_t> leaf_axis(size_t a, const Array& leaf, const std::string& path) const {
    std::optional<int64_t> axis = in_axis(a);
    if (!axis) return axis;
    const int64_t rank = leaf.ndim();
    const int64_t normalised = *axis < 0 ? *axis + rank : *axis;
    if (normalised < 0 || normalised >= rank) {
      throw EngineError("pmap was requested to map its argument along axis " +
                        std::to_string(*axis) +
                        ", which implies that its rank should be at "
                        "least " +
                        std::to_string((*axis < 0 ? -*axis : *axis + 1)) + ", but is only " +
                        std::to_string(rank) + " (its shape is " + shape_to_string(leaf.shape()) +
                        "): argument " + std::to_string(a) + (path.empty() ? "" : " at " + path) +
                        ". Give it a device axis or use "
                        "in_axes None to broadcast it.");
    }
    return normalised;
  }

  int64_t mapped_size(const std::vector<Tree>& args) const {
    if (!options.in_axes.empty() && options.in_axes.size() != args.size()) {
      throw EngineError("pmap in_axes must have one entry per positional argument: got " +
                        describe_in_axes(options.in_axes) + " for " + std::to_string(args.size()) +
                        " arguments");
    }
    std::vector<std::string> lines;
    std::optional<int64_t> size;
    bool consistent = true;
    for (size_t a = 0; a < args.size(); ++a) {
      std::vector<Array> leaves = args[a].leaves();
      std::vector<std::string> paths = args[a].leaf_paths();
      for (size_t i = 0; i < leaves.size(); ++i) {
        std::optional<int64_t> axis = leaf_axis(a, leaves[i], paths[i]);
        if (!axis) continue;
        const int64_t length = leaves[i].shape()[static_cast<size_t>(*axis)];
        lines.push_back("  * argument " + std::to_string(a) +
                        (paths[i].empty() ? "" : " at " + paths[i]) + " has shape " +
                        shape_to_string(leaves[i].shape()) + " and axis " + std::to_string(*axis) +
                        " is to be mapped");
        if (size && *size != length) consistent = false;
        if (!size) size = length;
      }
    }
    if (!size) {
      throw EngineError(
          "pmap requires at least one argument with a mapped axis (in_axes not "
          "all None)");
    }
    if (!consistent) {
      // jax/_src/api.py (_mapped_axis_size): "pmap got inconsistent sizes for array axes to be
      // mapped:" followed by one line per argument.
      std::ostringstream out;
      out << "pmap got inconsistent sizes for array axes to be mapped:\n";
      for (const auto& line : lines) out << line << "\n";
      throw EngineError(out.str());
    }
    if (*size > devices.size()) {
      // jax/_src/interpreters/pxla.py: "compiling computation that requires N logical devices,
      // but only M XLA devices are available (num_replicas=N)".
      throw EngineError(
          "compiling computation that requires " + std::to_string(*size) +
          " logical devices, but only " + std::to_string(devices.size()) +
          " XLA devices are available (num_replicas=" + std::to_string(*size) +
          "). pmap maps the leading axis onto devices: reshape the global batch to "
          "(devices, per_device_batch, ...), so its length must be a multiple of the device "
          "count (PyTorch's DistributedSampler pads instead; pitfall P6)");
    }
    return *size;
  }

  std::string signature(const std::vector<Tree>& args, int64_t size) const {
    return "size=" + std::to_string(size) + "|" +
           runtime::call_signature(args, options.static_broadcasted_argnums);
  }

  runtime::TracedFunction trace(const std::vector<Tree>& args, int64_t size) const {
    ir::ScopedAxis axis(options.axis_name, size);
    return runtime::trace_function(
        function, args, options.static_broadcasted_argnums,
        [&](size_t a, size_t i, const Array& leaf) {
          std::optional<int64_t> mapped = leaf_axis(a, leaf, args[a].leaf_paths()[i]);
          return mapped ? without_axis(leaf.shape(), *mapped) : leaf.shape();
        },
        "pmap");
  }

  // The out_axis of each output leaf: per top-level tuple entry, or one for all.
  std::vector<std::optional<int64_t>> leaf_out_axes(const Tree& output) const {
    std::vector<std::optional<int64_t>> axes;
    const auto& spec = options.out_axes;
    if (spec.size() > 1 && output.kind() == Tree::Kind::kTuple &&
        spec.size() == output.children().size()) {
      for (size_t c = 0; c < spec.size(); ++c) {
        for (size_t i = 0; i < output.children()[c].leaves().size(); ++i) axes.push_back(spec[c]);
      }
      return axes;
    }
    if (spec.size() > 1) {
      throw EngineError("pmap out_axes has " + std::to_string(spec.size()) +
                        " entries but the function returns " + output.structure());
    }
    const std::optional<int64_t> all = spec.empty() ? std::optional<int64_t>(0) : spec.front();
    axes.assign(output.leaves().size(), all);
    return axes;
  }
};

Pmapped::Pmapped(TreeFunction function, PmapOptions options) : state_(std::make_shared<State>()) {
  state_->function = std::move(function);
  state_->devices = options.devices ? *options.devices : DeviceSet::from_environment();
  state_->options = std::move(options);
}

Pmapped::~Pmapped() = default;

Tree Pmapped::operator()(const std::vector<Tree>& args) const {
  State& state = *state_;
  const int64_t size = state.mapped_size(args);
  const runtime::TracedFunction* compiled =
      &state.cache.get(state.signature(args, size), [&] { return state.trace(args, size); });

  // Per-device inputs: slices of mapped leaves, shared storage for broadcast ones.
  const size_t num_devices = static_cast<size_t>(size);
  std::vector<std::vector<Buffer>> per_device(num_devices);
  std::vector<bool> donated;
  for (size_t a = 0; a < args.size(); ++a) {
    if (state.is_static(a)) continue;
    const bool donate = state.options.donate_argnums.count(a) > 0;
    std::vector<Array> leaves = args[a].leaves();
    std::vector<std::string> paths = args[a].leaf_paths();
    for (size_t i = 0; i < leaves.size(); ++i) {
      std::optional<int64_t> axis = state.leaf_axis(a, leaves[i], paths[i]);
      const Buffer& source = leaves[i].buffer("pmap argument");
      for (size_t d = 0; d < num_devices; ++d) {
        per_device[d].push_back(axis ? take_slice(source, *axis, d) : source);
      }
      // A donated mapped leaf's slices are fresh buffers the program may overwrite; the
      // caller's array is deleted, as a donated jax.Array is.
      donated.push_back(donate && axis.has_value());
      if (donate) leaves[i].donate();
    }
  }
  runtime::MappedExecutionResult result =
      runtime::execute_mapped(compiled->program, std::move(per_device), donated);
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.last.peak_bytes_per_device = result.peak_bytes_per_device;
    state.last.num_ops = static_cast<int64_t>(compiled->program.equations.size());
    state.last.num_collectives = result.num_collectives;
    state.last.donated_reuses = result.donated_reuses;
  }

  check_replicated(result.per_device_outputs, compiled->output,
                   state.options.check_replicated_outputs);
  const std::vector<std::optional<int64_t>> out_axes = state.leaf_out_axes(compiled->output);
  const std::vector<std::string> out_paths = compiled->output.leaf_paths();
  std::vector<Array> outputs;
  for (size_t o = 0; o < out_axes.size(); ++o) {
    std::vector<Buffer> values;
    for (size_t d = 0; d < num_devices; ++d) values.push_back(result.per_device_outputs[d][o]);
    if (out_axes[o] && *out_axes[o] != 0) {
      throw EngineError("pmap out_axes other than 0 and None are not supported yet");
    }
    if (out_axes[o]) {
      outputs.emplace_back(stack(values));
      continue;
    }
    for (size_t d = 1; d < num_devices; ++d) {
      if (*values[d].bytes != *values[0].bytes) {
        throw EngineError("pmap out_axes=None: output " +
                          (out_paths[o].empty() ? std::to_string(o) : out_paths[o]) +
                          " differs between device 0 and device " + std::to_string(d) +
                          "; only values that are the same on every device (after psum or "
                          "pmean) can be returned without a device axis");
      }
    }
    outputs.emplace_back(values[0]);
  }
  return compiled->output.unflatten(outputs);
}

CacheStats Pmapped::cache_stats() const { return state_->cache.stats(); }

MappedExecutionStats Pmapped::last_execution() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->last;
}

std::string Pmapped::program_text(const std::vector<Tree>& args) const {
  return state_->trace(args, state_->mapped_size(args)).program.to_string();
}

Pmapped pmap(TreeFunction function, PmapOptions options) {
  return Pmapped(std::move(function), std::move(options));
}

}  // namespace pmap_engine
