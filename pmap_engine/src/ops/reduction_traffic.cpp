// ReductionTraffic: per-position byte counts, filled by the reduction kernels' worker threads
// (several at once for a large operand), read by the caller once the pmapped call returns.
#include "ops/reduction_traffic.h"

#include <atomic>
#include <mutex>
#include <vector>

#include "pmap_engine/collectives.h"
#include "pmap_engine/dtype.h"

namespace pmap_engine {
namespace {

struct Tally {
  std::mutex mutex;
  std::vector<int64_t> sent;
  std::vector<int64_t> received;
};

Tally& tally() {
  static Tally instance;
  return instance;
}

// Checked before the lock: kernels run with no counter almost always.
std::atomic<bool> counting{false};

void grow(std::vector<int64_t>& counts, size_t position) {
  if (counts.size() <= position) counts.resize(position + 1, 0);
}

}  // namespace

namespace ops {

void record_reduction_transfer(size_t from, size_t to, size_t bytes) {
  if (!counting.load(std::memory_order_acquire)) return;
  Tally& counts = tally();
  std::lock_guard<std::mutex> lock(counts.mutex);
  grow(counts.sent, from);
  grow(counts.received, to);
  counts.sent[from] += static_cast<int64_t>(bytes);
  counts.received[to] += static_cast<int64_t>(bytes);
}

}  // namespace ops

ReductionTraffic::ReductionTraffic() {
  if (counting.exchange(true)) {
    throw EngineError("ReductionTraffic: another instance is already counting");
  }
  Tally& counts = tally();
  std::lock_guard<std::mutex> lock(counts.mutex);
  counts.sent.clear();
  counts.received.clear();
}

ReductionTraffic::~ReductionTraffic() { counting.store(false, std::memory_order_release); }

std::vector<int64_t> ReductionTraffic::sent_bytes() const {
  Tally& counts = tally();
  std::lock_guard<std::mutex> lock(counts.mutex);
  return counts.sent;
}

std::vector<int64_t> ReductionTraffic::received_bytes() const {
  Tally& counts = tally();
  std::lock_guard<std::mutex> lock(counts.mutex);
  return counts.received;
}

}  // namespace pmap_engine
