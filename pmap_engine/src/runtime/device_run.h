// One device's execution of a program: its variables' buffers, their liveness, the storage
// pool, and the exact peak of live bytes. The single-device executor drives one DeviceRun;
// the mapped executor drives one per device in lockstep, and runs collectives across them.
#pragma once

#include <map>
#include <vector>

#include "ir/program.h"
#include "pmap_engine/transforms.h"
#include "runtime/buffer_pool.h"

namespace pmap_engine::runtime {

// When each variable is last read, computed once per program and shared by all devices.
struct Liveness {
  explicit Liveness(const ir::Program& program);
  std::vector<size_t> last_use;  // index of the last equation reading the variable
  std::vector<bool> is_read;
  std::vector<bool> is_output;
  // Per storage size, the equations with a result of that size, in order: storage that dies
  // when the pool already holds one for each result still to come goes back to the heap.
  std::map<size_t, std::vector<size_t>> results_of_size;
  // How many results of `num_bytes` equations after `e` produce.
  size_t results_after(size_t num_bytes, size_t e) const;
};

class DeviceRun {
 public:
  DeviceRun(const ir::Program& program, const Liveness& liveness);

  // Arguments (donated ones may be recycled) and the program's constants.
  void bind_inputs(std::vector<Buffer> inputs, const std::vector<bool>& donated);
  // Equation e's operands, for a collective that runs across devices.
  std::vector<const Buffer*> operands(size_t e) const;
  // Runs equation e's kernel (not a collective) on this device.
  void run(size_t e);
  // Stores equation e's results and frees what dies with it.
  void finish(size_t e, std::vector<Buffer> results);

  std::vector<Buffer> outputs() const;
  int64_t peak_bytes() const { return peak_bytes_; }
  // The most this device held at once: live buffers plus the pool's dead storage.
  int64_t peak_footprint_bytes() const { return peak_footprint_; }
  int64_t donated_reuses() const { return pool_.donated_reuses(); }

 private:
  void define(int var, Buffer buffer, bool may_recycle, bool donation);
  void release(int var, size_t e);
  bool dies_at(int var, size_t e) const;
  void offer_dying_input(size_t e);

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
