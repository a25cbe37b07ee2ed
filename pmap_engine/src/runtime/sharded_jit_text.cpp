// ShardedCall::text: what `parity program --sharded` prints, laid out as XLA's dumps after
// sharding propagation and SPMD partitioning are read: each value's sharding, the per-device
// program, its collectives, and what each device holds.
#include <map>
#include <sstream>

#include "runtime/sharded_jit.h"

namespace pmap_engine::runtime {
namespace {

std::string type_text(const ir::AbstractValue& value) {
  return type_to_string(value.dtype, value.shape);
}

int64_t bytes_of(const ir::AbstractValue& value, const Shape& shape) {
  return static_cast<int64_t>(shape_num_elements(shape) * dtype_num_bytes(value.dtype));
}

// XLA's names for the engine's collectives.
std::string collective_kind(const std::string& primitive) {
  if (primitive == "psum") return "all-reduce";
  if (primitive == "pmax") return "all-reduce(max)";
  if (primitive == "all_gather") return "all-gather";
  if (primitive == "reduce_scatter") return "reduce-scatter";
  return primitive;
}

// A spec as JAX 0.11 prints it: P('data',).
std::string spec_text(const ValueSharding& sharding) {
  const std::string text = sharding.spec().to_string();  // "PartitionSpec('data',)"
  return "P" + text.substr(std::string("PartitionSpec").size());
}

std::string megabytes(int64_t bytes) {
  std::ostringstream out;
  out.precision(3);
  out << static_cast<double>(bytes) / 1e6 << " MB";
  return out.str();
}

}  // namespace

std::string ShardedCall::text(const std::vector<Tree>& args) const {
  const ShardedProgram& sharded = *sharded_;
  const ir::Program& global = sharded.program;
  const Mesh& mesh = sharded.mesh;
  std::ostringstream out;
  out << "# Sharding propagation over " << mesh.to_string() << ": every value of the global "
      << "program, its sharding and one device's block\n";
  const auto line = [&](int var, const std::string& what) {
    const ir::AbstractValue& value = global.vars[static_cast<size_t>(var)];
    const ValueSharding& sharding = sharded.shardings[static_cast<size_t>(var)];
    out << "  " << what << "  " << type_text(value) << "  " << spec_text(sharding)
        << "  block " << shape_to_string(local_shape(value.shape, sharding, mesh)) << "\n";
  };
  for (size_t i = 0; i < global.inputs.size(); ++i) line(global.inputs[i], "input " + std::to_string(i));
  for (const ir::Equation& eq : global.equations) {
    for (int var : eq.outputs) line(var, eq.primitive->name);
  }
  for (size_t o = 0; o < global.outputs.size(); ++o) {
    const ir::AbstractValue& value = global.vars[static_cast<size_t>(global.outputs[o])];
    out << "  output " << o << "  " << type_text(value) << "  "
        << spec_text(sharded.output_shardings[o]) << "\n";
  }

  const ir::Program device = mapped_->traced_program(mesh, args, in_, out_shardings());
  out << "\n# The program each device runs after SPMD partitioning\n" << device.to_string();

  out << "\n# Collectives the partitioner inserted, per device\n";
  std::map<std::string, int64_t> counts, moved;
  for (const ir::Equation& eq : device.equations) {
    if (!eq.primitive->collective_kernel || eq.primitive->name == "axis_index") continue;
    const std::string kind = collective_kind(eq.primitive->name);
    ++counts[kind];
    const ir::AbstractValue& operand = device.vars[static_cast<size_t>(eq.inputs[0])];
    moved[kind] += bytes_of(operand, operand.shape);
    out << "  " << kind << "  " << type_text(operand) << " -> "
        << type_text(device.vars[static_cast<size_t>(eq.outputs[0])]) << "  "
        << eq.params.to_string() << "\n";
  }
  if (counts.empty()) out << "  none\n";
  for (const auto& [kind, count] : counts) {
    out << "  total " << kind << ": " << count << " (operands " << megabytes(moved[kind]) << ")\n";
  }

  out << "\n# Memory per device: arguments' and results' blocks (whole value in brackets)\n";
  int64_t argument_bytes = 0, argument_whole = 0;
  for (size_t i = 0; i < global.inputs.size(); ++i) {
    const ir::AbstractValue& value = global.vars[static_cast<size_t>(global.inputs[i])];
    const ValueSharding& sharding = sharded.shardings[static_cast<size_t>(global.inputs[i])];
    argument_bytes += bytes_of(value, local_shape(value.shape, sharding, mesh));
    argument_whole += bytes_of(value, value.shape);
  }
  int64_t result_bytes = 0, result_whole = 0;
  for (size_t o = 0; o < global.outputs.size(); ++o) {
    const ir::AbstractValue& value = global.vars[static_cast<size_t>(global.outputs[o])];
    result_bytes += bytes_of(value, local_shape(value.shape, sharded.output_shardings[o], mesh));
    result_whole += bytes_of(value, value.shape);
  }
  out << "  arguments " << megabytes(argument_bytes) << " (" << megabytes(argument_whole)
      << ")\n  results   " << megabytes(result_bytes) << " (" << megabytes(result_whole) << ")\n";
  return out.str();
}

}  // namespace pmap_engine::runtime
