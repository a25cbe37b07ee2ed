// Storage reuse while a program runs: dead variables give their storage back, and
// Buffer::allocate takes a same-sized one from the active pool before asking the heap.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

#include "pmap_engine/array.h"

namespace pmap_engine::runtime {

class BufferPool {
 public:
  using Storage = std::shared_ptr<ByteStorage>;

  BufferPool() = default;
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Makes `pool` this thread's active pool while it lives (a device's kernels run on
  // whichever worker thread executes them).
  class Active {
   public:
    explicit Active(BufferPool& pool);
    ~Active();
    Active(const Active&) = delete;
    Active& operator=(const Active&) = delete;

   private:
    BufferPool* previous_;
  };

  // Storage nobody else holds; `donated` marks a caller's donated argument.
  void give(Storage storage, bool donated);
  // A storage of exactly `num_bytes` (contents undefined: the caller zeroes it if it needs
  // to), or null. For an allocation the kernel will overwrite element by element
  // (`for_overwrite`), an in-place candidate of that size comes first.
  Storage take(size_t num_bytes, bool for_overwrite);
  // Offers an input's storage to the next allocation of the same size, for one kernel.
  void offer_in_place(Storage storage, bool donated);
  void withdraw_in_place();
  int64_t donated_reuses() const { return donated_reuses_; }
  // Bytes of dead storage kept for reuse (not live, but still held).
  size_t held_bytes() const { return held_bytes_; }
  // How many dead storages of `num_bytes` it keeps.
  size_t count(size_t num_bytes) const { return free_.count(num_bytes); }

  static BufferPool* active();

 private:
  std::multimap<size_t, std::pair<Storage, bool>> free_;
  Storage in_place_;
  bool in_place_donated_ = false;
  int64_t donated_reuses_ = 0;
  size_t held_bytes_ = 0;
};

}  // namespace pmap_engine::runtime
