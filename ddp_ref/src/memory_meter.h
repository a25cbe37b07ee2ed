// Peak memory per rank, measured by a counting wrapper around LibTorch's CPU allocator.
//
// Every tensor LibTorch allocates on the CPU goes through c10's CPU allocator. The wrapper
// charges each allocation to the rank whose thread made it (a thread-local rank slot set by
// the trainer) and credits it back when the memory is freed, whichever thread frees it; the
// peak of each rank's live bytes is its peak memory. Allocations made outside any rank's
// thread (data loading in the main thread, Gloo's workers) are not charged to a rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parity::ddp_ref {

class MemoryMeter {
 public:
  // Installs the counting allocator (once per process) and resets the counters of `num_ranks`
  // slots.
  static void install(int64_t num_ranks);
  // Charges this thread's allocations to `slot` until the returned guard ends.
  class ScopedSlot {
   public:
    explicit ScopedSlot(int64_t slot);
    ~ScopedSlot();
    ScopedSlot(const ScopedSlot&) = delete;
    ScopedSlot& operator=(const ScopedSlot&) = delete;

   private:
    int64_t previous_;
  };
  static int64_t peak_bytes(int64_t slot);
  static const char* method();
};

// The process's peak resident set size (getrusage ru_maxrss), in bytes.
int64_t process_max_rss_bytes();

}  // namespace parity::ddp_ref
