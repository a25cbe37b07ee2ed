#include "runtime/executor.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "runtime/device_run.h"

namespace pmap_engine::runtime {

ExecutionResult execute(const ir::Program& program, std::vector<Buffer> inputs,
                        const std::vector<bool>& donated) {
  const Liveness liveness(program);
  DeviceRun device(program, liveness);
  device.bind_inputs(std::move(inputs), donated);
  for (size_t e = 0; e < program.equations.size(); ++e) {
    if (!program.equations[e].primitive->kernel) {
      throw EngineError(program.equations[e].primitive->name +
                        " is a collective: it runs only inside pmap, over a named axis");
    }
    device.run(e);
  }
  ExecutionResult result;
  result.outputs = device.outputs();
  result.stats.peak_bytes = device.peak_bytes();
  result.stats.num_ops = static_cast<int64_t>(program.equations.size());
  result.stats.donated_reuses = device.donated_reuses();
  return result;
}

namespace {

// The device groups a collective over `axis_name` spans: devices that share every other mesh
// coordinate, each group in coordinate order along the axis.
std::vector<std::vector<size_t>> collective_groups(const std::vector<MeshAxis>& mesh_axes,
                                                   const std::string& axis_name,
                                                   size_t num_devices) {
  size_t position = 0;
  while (position < mesh_axes.size() && mesh_axes[position].name != axis_name) ++position;
  if (position == mesh_axes.size()) {
    throw std::logic_error("collective over axis '" + axis_name + "', which the mesh lacks");
  }
  size_t stride = 1;
  for (size_t i = position + 1; i < mesh_axes.size(); ++i) {
    stride *= static_cast<size_t>(mesh_axes[i].size);
  }
  const size_t size = static_cast<size_t>(mesh_axes[position].size);
  std::vector<std::vector<size_t>> groups;
  for (size_t d = 0; d < num_devices; ++d) {
    if ((d / stride) % size != 0) continue;  // not the first device of its group
    std::vector<size_t> group;
    for (size_t j = 0; j < size; ++j) group.push_back(d + j * stride);
    groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace

// Devices run in lockstep by segments: the equations between two collectives run on every
// device in parallel (a few workers, each looping over its devices: cheaper than a thread per
// device when devices outnumber cores); a collective then runs once across all devices, in
// device order, which makes its reduction order fixed.
MappedExecutionResult execute_mapped(const ir::Program& program,
                                     std::vector<std::vector<Buffer>> per_device_inputs,
                                     const std::vector<bool>& donated,
                                     const std::vector<MeshAxis>& mesh_axes) {
  const size_t num_devices = per_device_inputs.size();
  const Liveness liveness(program);
  std::vector<std::unique_ptr<DeviceRun>> devices;
  for (size_t d = 0; d < num_devices; ++d) {
    devices.push_back(std::make_unique<DeviceRun>(program, liveness));
    devices.back()->bind_inputs(std::move(per_device_inputs[d]), donated);
  }
  const size_t num_workers =
      std::min<size_t>(num_devices, std::max(1u, std::thread::hardware_concurrency()));
  auto run_segment = [&](size_t begin, size_t end) {
    if (begin == end) return;
    auto work = [&](size_t worker) {
      for (size_t d = worker; d < num_devices; d += num_workers) {
        for (size_t e = begin; e < end; ++e) devices[d]->run(e);
      }
    };
    std::vector<std::thread> workers;
    for (size_t w = 1; w < num_workers; ++w) workers.emplace_back(work, w);
    work(0);
    for (auto& worker : workers) worker.join();
  };

  MappedExecutionResult result;
  size_t segment_begin = 0;
  for (size_t e = 0; e < program.equations.size(); ++e) {
    const ir::Equation& equation = program.equations[e];
    if (equation.primitive->kernel) continue;
    run_segment(segment_begin, e);
    for (const auto& group :
         collective_groups(mesh_axes, equation.params.text("axis_name"), num_devices)) {
      std::vector<std::vector<const Buffer*>> operands;
      for (size_t d : group) operands.push_back(devices[d]->operands(e));
      std::vector<std::vector<Buffer>> results =
          equation.primitive->collective_kernel(operands, equation.params);
      for (size_t j = 0; j < group.size(); ++j) devices[group[j]]->finish(e, std::move(results[j]));
    }
    ++result.num_collectives;
    segment_begin = e + 1;
  }
  run_segment(segment_begin, program.equations.size());

  for (auto& device : devices) {
    result.per_device_outputs.push_back(device->outputs());
    result.peak_bytes_per_device = std::max(result.peak_bytes_per_device, device->peak_bytes());
    result.donated_reuses += device->donated_reuses();
  }
  return result;
}

}  // namespace pmap_engine::runtime
