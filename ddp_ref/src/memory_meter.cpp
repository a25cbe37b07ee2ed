#include "memory_meter.h"

#include <c10/core/CPUAllocator.h>
#include <sys/resource.h>

#include <array>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "parity/common/error.h"
#include "torch_pch.h"

namespace parity::ddp_ref {
namespace {

constexpr int64_t kMaxSlots = 1024;
thread_local int64_t current_slot = -1;

struct SlotCounter {
  std::atomic<int64_t> live_bytes{0};
  std::atomic<int64_t> peak_bytes{0};

  void charge(int64_t num_bytes) {
    int64_t live = live_bytes.fetch_add(num_bytes) + num_bytes;
    int64_t peak = peak_bytes.load();
    while (live > peak && !peak_bytes.compare_exchange_weak(peak, live)) {
    }
  }
};
std::array<SlotCounter, kMaxSlots> counters;

// The inner allocation and whom it was charged to, kept alive until the tensor frees it.
struct Allocation {
  c10::DataPtr inner;
  int64_t num_bytes;
  int64_t slot;
};

// Live allocations by data pointer. The DataPtrs handed out carry the data pointer itself as
// their context, as the default CPU allocator's do, because c10::Allocator::raw_allocate (which
// oneDNN's bf16/f16 matmul uses) asserts exactly that and frees through raw_deleter() with the
// pointer alone.
std::mutex allocations_mutex;
std::unordered_map<void*, Allocation>& allocations() {
  static auto* live = new std::unordered_map<void*, Allocation>();  // outlives static tensors
  return *live;
}

void free_by_pointer(void* data) {
  if (data == nullptr) return;  // a zero-byte allocation: nothing was recorded
  Allocation allocation;
  {
    std::lock_guard<std::mutex> lock(allocations_mutex);
    auto found = allocations().find(data);
    allocation = std::move(found->second);
    allocations().erase(found);
  }
  if (allocation.slot >= 0) counters[allocation.slot].live_bytes -= allocation.num_bytes;
}  // allocation.inner frees the memory here

class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t num_bytes) const override {
    c10::DataPtr inner = base_->allocate(num_bytes);
    void* data = inner.get();
    c10::Device device = inner.device();
    if (data == nullptr) return {nullptr, nullptr, &free_by_pointer, device};
    int64_t slot = current_slot;
    if (slot >= 0) counters[slot].charge(static_cast<int64_t>(num_bytes));
    {
      std::lock_guard<std::mutex> lock(allocations_mutex);
      allocations().emplace(data,
                            Allocation{std::move(inner), static_cast<int64_t>(num_bytes), slot});
    }
    return {data, data, &free_by_pointer, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_by_pointer; }

 private:
  c10::Allocator* base_;
};

}  // namespace

void MemoryMeter::install(int64_t num_ranks) {
  PARITY_CHECK_LE(num_ranks, kMaxSlots);
  static CountingCpuAllocator allocator(c10::GetDefaultCPUAllocator());
  static bool installed = false;
  if (!installed) {
    // Priority 1 beats the default allocator's registration (priority 0).
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
    installed = true;
  }
  for (int64_t slot = 0; slot < num_ranks; ++slot) {
    counters[slot].peak_bytes = counters[slot].live_bytes.load();
  }
}

MemoryMeter::ScopedSlot::ScopedSlot(int64_t slot) : previous_(current_slot) {
  PARITY_CHECK_LT(slot, kMaxSlots);
  current_slot = slot;
}
MemoryMeter::ScopedSlot::~ScopedSlot() { current_slot = previous_; }

int64_t MemoryMeter::peak_bytes(int64_t slot) { return counters[slot].peak_bytes.load(); }

const char* MemoryMeter::method() {
  return "LibTorch CPU allocator, counted per rank thread (peak live tensor bytes)";
}

int64_t process_max_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace parity::ddp_ref
