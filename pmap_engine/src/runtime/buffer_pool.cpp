#include "runtime/buffer_pool.h"

namespace pmap_engine::runtime {
namespace {
thread_local BufferPool* active_pool = nullptr;
}

BufferPool::Active::Active(BufferPool& pool) : previous_(active_pool) { active_pool = &pool; }
BufferPool::Active::~Active() { active_pool = previous_; }
BufferPool* BufferPool::active() { return active_pool; }

void BufferPool::give(Storage storage, bool donated) {
  if (!storage || storage.use_count() != 1) return;  // someone else still reads it
  const size_t num_bytes = storage->size();
  held_bytes_ += num_bytes;
  free_.emplace(num_bytes, std::make_pair(std::move(storage), donated));
}

void BufferPool::offer_in_place(Storage storage, bool donated) {
  in_place_ = std::move(storage);
  in_place_donated_ = donated;
}

void BufferPool::withdraw_in_place() { in_place_ = nullptr; }

BufferPool::Storage BufferPool::take(size_t num_bytes, bool for_overwrite) {
  if (for_overwrite && in_place_ && in_place_->size() == num_bytes) {
    if (in_place_donated_) ++donated_reuses_;
    return std::move(in_place_);
  }
  auto found = free_.find(num_bytes);
  if (found == free_.end()) return nullptr;
  Storage storage = std::move(found->second.first);
  held_bytes_ -= num_bytes;
  if (found->second.second) ++donated_reuses_;
  free_.erase(found);
  return storage;
}

}  // namespace pmap_engine::runtime
