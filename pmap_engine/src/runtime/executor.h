// Runs a traced program on concrete buffers, with memory planned from liveness.
//
// Vocabulary:
//   last use    the last step of the schedule reading a variable (runtime/mapped_schedule.h:
//               the equations in order, or a mapped program's starts, dones and runs; program
//               outputs live to the end).
//   live bytes  the bytes of every variable that has been produced (or passed in) and not yet
//               passed its last use; the peak of that sum is the run's exact peak memory.
//   pool        storage of dead variables, reused by later allocations of the same size;
//               a donated argument's storage joins it after its last use, so an update of
//               the same shape is written in place.
#pragma once

#include <vector>

#include "ir/program.h"
#include "pmap_engine/mesh.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine::runtime {

struct ExecutionResult {
  std::vector<Buffer> outputs;
  ExecutionStats stats;
};

// `donated[i]` says the caller gave up inputs[i]'s storage (inputs are taken by value so
// that a donated buffer has no other owner here).
ExecutionResult execute(const ir::Program& program, std::vector<Buffer> inputs,
                        const std::vector<bool>& donated);

struct MappedExecutionResult {
  std::vector<std::vector<Buffer>> per_device_outputs;  // [device][output]
  int64_t peak_bytes_per_device = 0;
  int64_t peak_footprint_bytes_per_device = 0;
  int64_t num_collectives = 0;
  int64_t donated_reuses = 0;
  // How often a device thread had nothing to run: all its devices waited for collectives
  // that other devices had not started yet (at most once per collective per thread).
  int64_t num_waits = 0;
};

// A mapped program whose devices span several processes (distributed.h): this process runs
// devices first_device .. first_device + local count - 1 of the mesh; the others run elsewhere.
struct ProcessSpan {
  int64_t processes = 1;
  int64_t first_device = 0;
};

// Runs `program` on every device of a mesh (one entry of per_device_inputs each, in the mesh's
// row-major device order), each device in the order of mapped_schedule
// (runtime/mapped_schedule.h): a collective starts, the device computes what does not need its
// results, and waits at its done only if it has not run. A collective over axis A runs once
// per group of devices that differ only in their coordinate on A, in coordinate order. With a
// `span`, per_device_inputs are this process's devices only; each collective first gathers
// every process's operands (the same shapes on every device of an SPMD program), then runs the
// same kernel on all of them, so the result is bitwise what one process holding every device
// computes.
MappedExecutionResult execute_mapped(const ir::Program& program,
                                     std::vector<std::vector<Buffer>> per_device_inputs,
                                     const std::vector<bool>& donated,
                                     const std::vector<MeshAxis>& mesh_axes,
                                     const ProcessSpan* span = nullptr);

// MappedExecutionResult::num_waits summed over every mapped run of this process (for
// benchmarks, which reach the executor through jit or pmap).
int64_t mapped_collective_waits();

}  // namespace pmap_engine::runtime
