// Where the devices of one mapped run meet for their collectives (runtime/mapped_schedule.h):
// each device starts a collective by handing over its operands and goes on; the device that
// starts it last runs it, for every device, on its own thread, and each device takes its
// results at its done. Collectives run one at a time in the program's order (a start made
// ready early waits for the ones before it), so a collective across processes
// (distributed::process_allgather) is called in one order on every process, and each runs its
// kernel on the same operands, in device order, as if every device stopped at it: the same
// bits whatever the timing.
#pragma once

#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ir/program.h"
#include "pmap_engine/distributed.h"
#include "pmap_engine/mesh.h"
#include "runtime/executor.h"

namespace pmap_engine::runtime {

// The device groups a collective over `axis_name` spans: devices that share every other mesh
// coordinate, each group in coordinate order along the axis.
inline std::vector<std::vector<size_t>> collective_groups(const std::vector<MeshAxis>& mesh_axes,
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

class CollectiveRendezvous {
 public:
  // `local_devices` run here (devices first_device .. of the mesh, with a `span`).
  CollectiveRendezvous(const ir::Program& program, const std::vector<MeshAxis>& mesh_axes,
                       size_t local_devices, const ProcessSpan* span)
      : program_(program),
        mesh_axes_(mesh_axes),
        local_devices_(local_devices),
        span_(span),
        failed_(local_devices, false) {
    for (size_t e = 0; e < program.equations.size(); ++e) {
      if (program.equations[e].primitive->kernel) continue;
      ordinal_[e] = collectives_.size();
      equation_of_.push_back(e);
      collectives_.emplace_back(local_devices);
    }
  }

  // Local device d starts collective equation e with its operands (valid until its done). If
  // that makes e (or, e having run, the ones after it) ready, they run here.
  void start(size_t e, size_t d, std::vector<const Buffer*> operands) {
    std::unique_lock<std::mutex> lock(mutex_);
    Collective& collective = collectives_[ordinal_.at(e)];
    collective.operands[d] = std::move(operands);
    collective.started[d] = true;
    ++collective.starts;
    if (running_) return;  // the thread running collectives now takes this one in its turn
    running_ = true;
    while (!broken_ && next_ < collectives_.size() &&
           collectives_[next_].starts == local_devices_) {
      Collective& ready = collectives_[next_];
      lock.unlock();
      std::exception_ptr failure;
      try {
        run(equation_of_[next_], ready);
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      if (failure) {
        failure_ = failure;
        broken_ = true;
      } else {
        ready.ran = true;
        ++next_;
      }
      ++events_;
      changed_.notify_all();
    }
    running_ = false;
  }

  // Device d's results of collective equation e once it has run; nullopt before.
  std::optional<std::vector<Buffer>> take(size_t e, size_t d) {
    std::lock_guard<std::mutex> lock(mutex_);
    Collective& collective = collectives_[ordinal_.at(e)];
    if (!collective.ran) return std::nullopt;
    return std::move(collective.results[d]);
  }

  // Whether collective equation e can no longer run: it failed, or one before it did, or a
  // device that has not started it failed (a failed device starts nothing more).
  bool never_runs(size_t e) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Collective& collective = collectives_[ordinal_.at(e)];
    if (collective.ran) return false;
    if (broken_) return true;
    for (size_t d = 0; d < local_devices_; ++d) {
      if (failed_[d] && !collective.started[d]) return true;
    }
    return false;
  }

  void device_failed(size_t d) {
    std::lock_guard<std::mutex> lock(mutex_);
    failed_[d] = true;
    ++events_;
    changed_.notify_all();
  }

  // A count of the collectives run and the failures so far, for wait_for_change.
  uint64_t events() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }
  // Blocks until events() differs from `seen`.
  void wait_for_change(uint64_t seen) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return events_ != seen; });
  }

  // The failure of a collective's own kernel (or of the exchange between processes).
  std::exception_ptr failure() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }

 private:
  struct Collective {
    explicit Collective(size_t devices)
        : operands(devices), started(devices, false), results(devices) {}
    std::vector<std::vector<const Buffer*>> operands;  // [local device][operand]
    std::vector<bool> started;
    size_t starts = 0;
    bool ran = false;
    std::vector<std::vector<Buffer>> results;  // [local device][output]
  };

  // Runs equation e's collective once per group of devices, each group in device order.
  void run(size_t e, Collective& collective) {
    const ir::Equation& equation = program_.equations[e];
    const size_t first_device = span_ ? static_cast<size_t>(span_->first_device) : 0;
    const size_t mesh_devices =
        span_ ? local_devices_ * static_cast<size_t>(span_->processes) : local_devices_;
    std::optional<GlobalOperands> global;
    if (span_) global.emplace(collective.operands, *span_);
    for (const auto& group :
         collective_groups(mesh_axes_, equation.params.text("axis_name"), mesh_devices)) {
      std::vector<std::vector<const Buffer*>> operands;
      for (size_t d : group) {
        operands.push_back(global ? global->operands(d) : collective.operands[d]);
      }
      std::vector<std::vector<Buffer>> results =
          equation.primitive->collective_kernel(operands, equation.params);
      for (size_t j = 0; j < group.size(); ++j) {
        const size_t d = group[j];
        if (global && !global->is_local(d)) continue;  // another process keeps its own result
        collective.results[d - first_device] = std::move(results[j]);
      }
    }
  }

  const ir::Program& program_;
  const std::vector<MeshAxis>& mesh_axes_;
  const size_t local_devices_;
  const ProcessSpan* span_;
  std::map<size_t, size_t> ordinal_;  // collective equation -> its place among collectives
  std::vector<size_t> equation_of_;   // and back

  std::mutex mutex_;  // guards everything below, and each collective's state
  std::condition_variable changed_;
  std::vector<Collective> collectives_;
  std::vector<bool> failed_;  // [local device]
  size_t next_ = 0;           // the first collective that has not run
  bool running_ = false;      // a thread is running collectives
  bool broken_ = false;       // a collective failed: none runs after it
  std::exception_ptr failure_;
  uint64_t events_ = 0;
};

}  // namespace pmap_engine::runtime
