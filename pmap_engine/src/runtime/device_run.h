// One device's execution of a program in the order of a schedule (runtime/mapped_schedule.h):
// its variables' buffers, their liveness, the storage pool, and the exact peak of live bytes.
// The single-device executor drives one DeviceRun through the program in order; the mapped
// executor drives one per device, and runs the collectives they start across them.
//
// Liveness is that of the schedule's steps, so the peak is exact for the order the device runs:
// a collective's operands are read by its start and stay live until its done (the collective
// may read them until then), and its results count from its start (reserved: XLA's async start
// allocates the output buffer), though they reach the device only at its done.
#pragma once

#include <map>
#include <vector>

#include "ir/program.h"
#include "pmap_engine/transforms.h"
#include "runtime/buffer_pool.h"
#include "runtime/mapped_schedule.h"

namespace pmap_engine::runtime {

// When each variable is last read in a schedule, computed once per program and shared by all
// devices. Steps are numbered by their place in the schedule.
struct Liveness {
  Liveness(const ir::Program& program, std::vector<Step> steps);
  std::vector<Step> steps;
  std::vector<size_t> last_use;  // the last step reading the variable
  std::vector<bool> is_output;
  // Per step, the variables that die after it: read there for the last time, or results
  // nobody reads (not outputs of the program).
  std::vector<std::vector<int>> dying_after;
  // Per storage size, the steps that define a result of that size, in order: storage that
  // dies when the pool already holds one for each result still to come goes back to the heap.
  std::map<size_t, std::vector<size_t>> results_of_size;
  // How many results of `num_bytes` steps after `s` define.
  size_t results_after(size_t num_bytes, size_t s) const;
};

class DeviceRun {
 public:
  DeviceRun(const ir::Program& program, const Liveness& liveness);

  // Arguments (donated ones may be recycled) and the program's constants.
  void bind_inputs(std::vector<Buffer> inputs, const std::vector<bool>& donated);
  // Step s, a kRun: runs its equation's kernel on this device.
  void run(size_t s);
  // Step s, a kStart: reserves the collective's results and returns its operands, which stay
  // valid until its done.
  std::vector<const Buffer*> start(size_t s);
  // Step s, a kDone: stores the collective's results (in place of the reservation).
  void done(size_t s, std::vector<Buffer> results);

  std::vector<Buffer> outputs() const;
  int64_t peak_bytes() const { return peak_bytes_; }
  // The most this device held at once: live buffers plus the pool's dead storage.
  int64_t peak_footprint_bytes() const { return peak_footprint_; }
  int64_t donated_reuses() const { return pool_.donated_reuses(); }

 private:
  std::vector<const Buffer*> operands(size_t e) const;
  void define(int var, Buffer buffer, bool may_recycle, bool donation);
  void count_live(int64_t bytes);
  void release(int var, size_t s);
  void release_dying(size_t s);
  bool dies_at(int var, size_t s) const;
  void offer_dying_input(size_t s);

  const ir::Program& program_;
  const Liveness& liveness_;
  BufferPool pool_;
  std::vector<Buffer> values_;
  std::vector<bool> recyclable_;
  std::vector<bool> from_donation_;
  // Live storage, counted once however many variables share it (an in-place result shares
  // its input's storage).
  std::map<const ByteStorage*, int> storage_users_;
  int64_t live_bytes_ = 0;
  int64_t peak_bytes_ = 0;
  int64_t peak_footprint_ = 0;
};

}  // namespace pmap_engine::runtime
