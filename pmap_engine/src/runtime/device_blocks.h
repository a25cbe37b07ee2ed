// The per-device blocks a mapped call's output leaves on its devices, as a jax.Array keeps its
// addressable shards: pmap(f)(x) returns an array whose data stays on the devices, and passing
// it to a call with the same sharding hands each device its own shard again without a copy
// (jax/_src/array.py ArrayImpl._arrays; pxla.py shard_args reuses them when the sharding
// matches). The global host value is assembled only when something reads it (Array::buffer(),
// as np.asarray(x) fetches and stitches the shards), once, on whichever thread asks first.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "pmap_engine/array.h"

namespace pmap_engine::runtime {

class DeviceBlocks {
 public:
  // `layout_key` names the mesh, its devices and the leaf's sharding (device_blocks_key);
  // `assemble` builds the global value from `blocks` (one per device, in mesh order).
  DeviceBlocks(std::vector<Buffer> blocks, std::string layout_key,
               std::function<Buffer(const std::vector<Buffer>&)> assemble)
      : blocks_(std::move(blocks)), layout_key_(std::move(layout_key)),
        assemble_(std::move(assemble)) {}

  const std::vector<Buffer>& blocks() const { return blocks_; }
  const std::string& layout_key() const { return layout_key_; }
  // The global value, assembled on first use.
  const Buffer& global() const {
    std::call_once(assembled_, [this] { global_ = assemble_(blocks_); });
    return global_;
  }

 private:
  std::vector<Buffer> blocks_;
  std::string layout_key_;
  std::function<Buffer(const std::vector<Buffer>&)> assemble_;
  mutable std::once_flag assembled_;
  mutable Buffer global_;
};

}  // namespace pmap_engine::runtime
