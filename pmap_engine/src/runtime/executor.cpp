#include "runtime/executor.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <thread>

#include "pmap_engine/distributed.h"
#include "runtime/device_run.h"

namespace pmap_engine::runtime {
namespace {

// Runs equation `e` on one device; a kernel's failure comes back as an EngineError naming the
// device and the op, whatever the kernel threw (a worker thread cannot let it escape: that
// would terminate the process).
void run_on_device(DeviceRun& device, const ir::Program& program, size_t e, size_t device_index) {
  const auto fail = [&](const char* what) {
    throw EngineError("device " + std::to_string(device_index) + ": " +
                      program.equations[e].primitive->name + " (equation " + std::to_string(e) +
                      " of the program) failed: " + what);
  };
  try {
    device.run(e);
  } catch (const std::exception& error) {
    fail(error.what());
  } catch (...) {
    fail("an exception that is not a std::exception");
  }
}

}  // namespace

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
    run_on_device(device, program, e, 0);
  }
  ExecutionResult result;
  result.outputs = device.outputs();
  result.stats.peak_bytes = device.peak_bytes();
  result.stats.peak_footprint_bytes = device.peak_footprint_bytes();
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

// The operands of one collective on every device of the mesh: this process's own, and the
// other processes' received through distributed::process_allgather (each process sends its
// devices' operand bytes in device order; shapes and dtypes are the local ones, as every
// device runs the same program).
class GlobalOperands {
 public:
  GlobalOperands(const std::vector<std::vector<const Buffer*>>& local, const ProcessSpan& span)
      : local_(local), span_(span) {
    std::vector<char> mine;
    for (const auto& device : local) {
      for (const Buffer* buffer : device) {
        const char* data = reinterpret_cast<const char*>(buffer->bytes->data());
        mine.insert(mine.end(), data, data + buffer->num_bytes());
      }
    }
    const std::vector<std::vector<char>> all = distributed::process_allgather(mine);
    const auto local_count = static_cast<int64_t>(local.size());
    remote_.resize(static_cast<size_t>(span.processes * local_count));
    for (int64_t p = 0; p < span.processes; ++p) {
      if (p * local_count == span.first_device) continue;
      size_t offset = 0;
      for (int64_t l = 0; l < local_count; ++l) {
        std::vector<Buffer>& device = remote_[static_cast<size_t>(p * local_count + l)];
        for (const Buffer* like : local.front()) {
          Buffer buffer = Buffer::allocate_uninitialized(like->dtype, like->shape);
          const std::vector<char>& bytes = all[static_cast<size_t>(p)];
          if (offset + buffer.num_bytes() > bytes.size()) {
            throw EngineError("distributed: process " + std::to_string(p) +
                              " sent fewer operand bytes than this process's program needs; "
                              "every process must run the same program (SPMD)");
          }
          std::memcpy(buffer.bytes->data(), bytes.data() + offset, buffer.num_bytes());
          offset += buffer.num_bytes();
          device.push_back(std::move(buffer));
        }
      }
    }
  }

  bool is_local(size_t device) const {
    const auto d = static_cast<int64_t>(device);
    return d >= span_.first_device && d < span_.first_device + static_cast<int64_t>(local_.size());
  }

  std::vector<const Buffer*> operands(size_t device) const {
    if (is_local(device)) return local_[device - static_cast<size_t>(span_.first_device)];
    std::vector<const Buffer*> out;
    for (const Buffer& buffer : remote_[device]) out.push_back(&buffer);
    return out;
  }

 private:
  const std::vector<std::vector<const Buffer*>>& local_;
  ProcessSpan span_;
  std::vector<std::vector<Buffer>> remote_;  // [global device][operand], other processes only
};

}  // namespace

// Devices run in lockstep by segments: the equations between two collectives run on every
// device in parallel (a few workers, each looping over its devices: cheaper than a thread per
// device when devices outnumber cores); a collective then runs once across all devices, in
// device order, which makes its reduction order fixed.
MappedExecutionResult execute_mapped(const ir::Program& program,
                                     std::vector<std::vector<Buffer>> per_device_inputs,
                                     const std::vector<bool>& donated,
                                     const std::vector<MeshAxis>& mesh_axes,
                                     const ProcessSpan* span) {
  const size_t num_devices = per_device_inputs.size();
  const auto first_device = static_cast<size_t>(span ? span->first_device : 0);
  const size_t mesh_devices = span ? num_devices * static_cast<size_t>(span->processes) : num_devices;
  const Liveness liveness(program);
  std::vector<std::unique_ptr<DeviceRun>> devices;
  for (size_t d = 0; d < num_devices; ++d) {
    devices.push_back(std::make_unique<DeviceRun>(program, liveness));
    devices.back()->bind_inputs(std::move(per_device_inputs[d]), donated);
  }
  const size_t num_workers =
      std::min<size_t>(num_devices, std::max(1u, std::thread::hardware_concurrency()));
  // A device stops at its first failure; the others finish the segment, and the lowest failed
  // device's error is re-thrown on the caller's thread, so which one is reported does not
  // depend on timing.
  auto run_segment = [&](size_t begin, size_t end) {
    if (begin == end) return;
    std::vector<std::exception_ptr> failures(num_devices);
    auto work = [&](size_t worker) {
      for (size_t d = worker; d < num_devices; d += num_workers) {
        try {
          for (size_t e = begin; e < end; ++e) {
            run_on_device(*devices[d], program, e, first_device + d);
          }
        } catch (...) {
          failures[d] = std::current_exception();
        }
      }
    };
    std::vector<std::thread> workers;
    for (size_t w = 1; w < num_workers; ++w) workers.emplace_back(work, w);
    work(0);
    for (auto& worker : workers) worker.join();
    for (const std::exception_ptr& failure : failures) {
      if (failure) std::rethrow_exception(failure);
    }
  };

  MappedExecutionResult result;
  size_t segment_begin = 0;
  for (size_t e = 0; e < program.equations.size(); ++e) {
    const ir::Equation& equation = program.equations[e];
    if (equation.primitive->kernel) continue;
    run_segment(segment_begin, e);
    std::vector<std::vector<const Buffer*>> local_operands;
    for (const auto& device : devices) local_operands.push_back(device->operands(e));
    std::optional<GlobalOperands> global;
    if (span) global.emplace(local_operands, *span);
    for (const auto& group :
         collective_groups(mesh_axes, equation.params.text("axis_name"), mesh_devices)) {
      std::vector<std::vector<const Buffer*>> operands;
      for (size_t d : group) {
        operands.push_back(global ? global->operands(d) : local_operands[d]);
      }
      std::vector<std::vector<Buffer>> results =
          equation.primitive->collective_kernel(operands, equation.params);
      for (size_t j = 0; j < group.size(); ++j) {
        const size_t d = group[j];
        if (global && !global->is_local(d)) continue;  // another process keeps its own result
        devices[d - first_device]->finish(e, std::move(results[j]));
      }
    }
    ++result.num_collectives;
    segment_begin = e + 1;
  }
  run_segment(segment_begin, program.equations.size());

  for (auto& device : devices) {
    result.per_device_outputs.push_back(device->outputs());
    result.peak_bytes_per_device = std::max(result.peak_bytes_per_device, device->peak_bytes());
    result.peak_footprint_bytes_per_device =
        std::max(result.peak_footprint_bytes_per_device, device->peak_footprint_bytes());
    result.donated_reuses += device->donated_reuses();
  }
  return result;
}

}  // namespace pmap_engine::runtime
