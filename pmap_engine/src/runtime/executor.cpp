#include "runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <thread>

#include "runtime/collective_rendezvous.h"
#include "runtime/device_run.h"

namespace pmap_engine::runtime {
namespace {

// Runs equation `e` on one device; a kernel's failure comes back as an EngineError naming the
// device and the op, whatever the kernel threw (a worker thread cannot let it escape: that
// would terminate the process).
void run_on_device(DeviceRun& device, const ir::Program& program, size_t step, size_t e,
                   size_t device_index) {
  const auto fail = [&](const char* what) {
    throw EngineError("device " + std::to_string(device_index) + ": " +
                      program.equations[e].primitive->name + " (equation " + std::to_string(e) +
                      " of the program) failed: " + what);
  };
  try {
    device.run(step);
  } catch (const std::exception& error) {
    fail(error.what());
  } catch (...) {
    fail("an exception that is not a std::exception");
  }
}

}  // namespace

ExecutionResult execute(const ir::Program& program, std::vector<Buffer> inputs,
                        const std::vector<bool>& donated) {
  const Liveness liveness(program, sequential_schedule(program));
  DeviceRun device(program, liveness);
  device.bind_inputs(std::move(inputs), donated);
  for (size_t e = 0; e < program.equations.size(); ++e) {
    if (!program.equations[e].primitive->kernel) {
      throw EngineError(program.equations[e].primitive->name +
                        " is a collective: it runs only inside pmap, over a named axis");
    }
    run_on_device(device, program, e, e, 0);
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

std::atomic<int64_t> total_collective_waits{0};

}  // namespace

int64_t mapped_collective_waits() { return total_collective_waits.load(); }

// Each device runs the mapped schedule (runtime/mapped_schedule.h): kernels, and collectives
// split into a start, after which it goes on, and a done, where it waits only if the
// collective has not run yet. A few workers (not a thread per device: devices may outnumber
// cores) each own every num_workers-th device and take them in turn, each until it starts a
// collective or reaches a done whose collective has not run; a worker sleeps only when all its
// devices wait. The collectives run where the last device starts them, in program order
// (runtime/collective_rendezvous.h), which makes their reduction order fixed.
MappedExecutionResult execute_mapped(const ir::Program& program,
                                     std::vector<std::vector<Buffer>> per_device_inputs,
                                     const std::vector<bool>& donated,
                                     const std::vector<MeshAxis>& mesh_axes,
                                     const ProcessSpan* span) {
  const size_t num_devices = per_device_inputs.size();
  const auto first_device = static_cast<size_t>(span ? span->first_device : 0);
  const Liveness liveness(program, mapped_schedule(program));
  const std::vector<Step>& steps = liveness.steps;
  std::vector<std::unique_ptr<DeviceRun>> devices;
  for (size_t d = 0; d < num_devices; ++d) {
    devices.push_back(std::make_unique<DeviceRun>(program, liveness));
    devices.back()->bind_inputs(std::move(per_device_inputs[d]), donated);
  }
  CollectiveRendezvous rendezvous(program, mesh_axes, num_devices, span);
  const size_t num_workers =
      std::min<size_t>(num_devices, std::max(1u, std::thread::hardware_concurrency()));

  // Per device, touched only by its worker: the next step, whether it has stopped (finished,
  // failed, or waiting for a collective that can no longer run), and its failure.
  std::vector<size_t> next(num_devices, 0);
  std::vector<char> stopped(num_devices, 0);  // not vector<bool>: workers write apart
  std::vector<std::exception_ptr> failures(num_devices);
  std::atomic<int64_t> waits{0};

  // Runs device d from its next step until it finishes, starts a collective (the worker's other
  // devices then start it too before any goes on: the collective runs as early as it can), or
  // reaches a done whose collective has not run.
  enum class Stop { kFinished, kStarted, kWaiting };
  auto advance = [&](size_t d) {
    DeviceRun& device = *devices[d];
    for (; next[d] < steps.size(); ++next[d]) {
      const Step& step = steps[next[d]];
      if (step.kind == Step::Kind::kRun) {
        run_on_device(device, program, next[d], step.equation, first_device + d);
      } else if (step.kind == Step::Kind::kStart) {
        rendezvous.start(step.equation, d, device.start(next[d]));
        ++next[d];
        return Stop::kStarted;
      } else {
        std::optional<std::vector<Buffer>> results = rendezvous.take(step.equation, d);
        if (!results) return Stop::kWaiting;
        device.done(next[d], std::move(*results));
      }
    }
    return Stop::kFinished;
  };
  // A device stops at its first failure; the others run on until they finish or wait for a
  // collective the failed device never starts, and the lowest failed device's error is
  // re-thrown on the caller's thread, so which one is reported does not depend on timing.
  auto work = [&](size_t worker) {
    for (;;) {
      const uint64_t seen = rendezvous.events();
      bool progressed = false;
      bool unfinished = false;
      for (size_t d = worker; d < num_devices; d += num_workers) {
        if (stopped[d]) continue;
        const size_t before = next[d];
        Stop stop = Stop::kFinished;
        try {
          stop = advance(d);
        } catch (...) {
          failures[d] = std::current_exception();
          stopped[d] = 1;
          rendezvous.device_failed(d);
          progressed = true;
          continue;
        }
        progressed = progressed || next[d] != before;
        if (stop == Stop::kFinished ||
            (stop == Stop::kWaiting && rendezvous.never_runs(steps[next[d]].equation))) {
          stopped[d] = 1;
        } else {
          unfinished = true;
        }
      }
      if (!unfinished) return;
      if (!progressed) {
        ++waits;
        rendezvous.wait_for_change(seen);
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
  if (std::exception_ptr failure = rendezvous.failure()) std::rethrow_exception(failure);

  MappedExecutionResult result;
  for (const Step& step : steps) result.num_collectives += step.kind == Step::Kind::kStart;
  result.num_waits = waits.load();
  total_collective_waits += result.num_waits;
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
