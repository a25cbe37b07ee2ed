#include "runtime/sharding.h"

#include <cstring>
#include <set>

namespace pmap_engine::runtime {
namespace {

std::string entry_text(const Mesh& mesh, const std::vector<size_t>& axes) {
  std::string text;
  for (size_t i = 0; i < axes.size(); ++i) {
    const MeshAxis& axis = mesh.axes()[axes[i]];
    text += (i ? ", " : "") + ("'" + axis.name + "' (of size " + std::to_string(axis.size) + ")");
  }
  return text;
}

// Copies the block of shape `block` at element offsets `offsets` between a row-major array of
// shape `global` and a dense block buffer. The trailing dimensions the block spans whole, and
// the last split one, form one contiguous run per remaining index.
void copy_block(std::byte* global_bytes, const Shape& global, std::byte* block_bytes,
                const Shape& block, const std::vector<int64_t>& offsets, size_t element_bytes,
                bool into_block) {
  const int64_t rank = static_cast<int64_t>(global.size());
  if (shape_num_elements(block) == 0) return;
  std::vector<size_t> global_stride(global.size(), element_bytes);
  for (int64_t d = rank - 2; d >= 0; --d) {
    global_stride[static_cast<size_t>(d)] =
        global_stride[static_cast<size_t>(d + 1)] * static_cast<size_t>(global[d + 1]);
  }
  int64_t last = rank - 1;  // the innermost dimension the block does not span whole
  while (last >= 0 && block[static_cast<size_t>(last)] == global[static_cast<size_t>(last)]) {
    --last;
  }
  if (last < 0) {  // the block is the whole array
    const size_t bytes = shape_num_elements(global) * element_bytes;
    std::memcpy(into_block ? block_bytes : global_bytes, into_block ? global_bytes : block_bytes,
                bytes);
    return;
  }
  const size_t lastu = static_cast<size_t>(last);
  const size_t run = static_cast<size_t>(block[lastu]) * global_stride[lastu];
  std::vector<int64_t> index(lastu, 0);  // odometer over the block's leading dimensions
  std::byte* block_cursor = block_bytes;
  while (true) {
    size_t start = static_cast<size_t>(offsets[lastu]) * global_stride[lastu];
    for (size_t d = 0; d < lastu; ++d) {
      start += static_cast<size_t>(offsets[d] + index[d]) * global_stride[d];
    }
    if (into_block) {
      std::memcpy(block_cursor, global_bytes + start, run);
    } else {
      std::memcpy(global_bytes + start, block_cursor, run);
    }
    block_cursor += run;
    int64_t d = static_cast<int64_t>(lastu) - 1;
    while (d >= 0 && ++index[static_cast<size_t>(d)] == block[static_cast<size_t>(d)]) {
      index[static_cast<size_t>(d)] = 0;
      --d;
    }
    if (d < 0) return;
  }
}

}  // namespace

BlockLayout::BlockLayout(const Mesh& mesh, const LeafSharding& sharding, const Shape& global_shape,
                         const std::string& where)
    : mesh_(&mesh), sharding_(sharding), global_(global_shape), block_(global_shape) {
  const auto& entries = sharding.spec.entries();
  if (entries.size() > global_.size()) {
    throw EngineError(where + ": " + sharding.spec.to_string() + " has " +
                      std::to_string(entries.size()) + " entries but the array has rank " +
                      std::to_string(global_.size()) + " (shape " + shape_to_string(global_) +
                      "); a PartitionSpec names at most one entry per dimension");
  }
  entry_axes_.resize(global_.size());
  std::set<size_t> used;
  for (size_t d = 0; d < entries.size(); ++d) {
    int64_t factor = 1;
    for (const std::string& name : entries[d]) {
      const size_t position = mesh.axis_position(name);
      if (!used.insert(position).second) {
        throw EngineError(where + ": " + sharding.spec.to_string() + " uses mesh axis '" + name +
                          "' more than once; each mesh axis can split one dimension");
      }
      entry_axes_[d].push_back(position);
      named_axes_ |= uint64_t{1} << position;
      factor *= mesh.axes()[position].size;
    }
    if (global_[d] % factor != 0) {
      // jax/_src/shard_map.py (_check_shapes_against_resources): "shard_map applied to the
      // function ... was given argument arrays with axis sizes that are not evenly divisible by
      // the corresponding mesh axis sizes", then one line per offending argument.
      throw EngineError(
          where + " of shape " + shape_to_string(global_) +
          ": axis sizes are not evenly divisible by the corresponding mesh axis sizes: it maps "
          "array axis " +
          std::to_string(d) + " (of size " + std::to_string(global_[d]) + ") to mesh axis " +
          entry_text(mesh, entry_axes_[d]) + ", but " + std::to_string(factor) +
          " does not evenly divide " + std::to_string(global_[d]) +
          ". Pad or trim that dimension to a multiple of " + std::to_string(factor) +
          ", or leave it unsplit (None)");
    }
    block_[d] = global_[d] / factor;
  }
  if (sharding.squeezed_dim && block_[static_cast<size_t>(*sharding.squeezed_dim)] != 1) {
    throw std::logic_error("squeezed dimension of block size " +
                           std::to_string(block_[static_cast<size_t>(*sharding.squeezed_dim)]));
  }
}

BlockLayout BlockLayout::for_output(const Mesh& mesh, const LeafSharding& sharding,
                                    const Shape& device_shape, const std::string& where) {
  Shape block = device_shape;
  if (sharding.squeezed_dim) {
    const int64_t dim = *sharding.squeezed_dim;
    if (dim < 0 || dim > static_cast<int64_t>(block.size())) {
      throw EngineError(where + ": out_axes " + std::to_string(dim) +
                        " is out of range for a per-device output of rank " +
                        std::to_string(block.size()) + "; it must be between 0 and " +
                        std::to_string(block.size()));
    }
    block.insert(block.begin() + dim, 1);
  }
  Shape global = block;
  const auto& entries = sharding.spec.entries();
  if (entries.size() > block.size()) {
    throw EngineError(where + ": out_specs " + sharding.spec.to_string() + " has " +
                      std::to_string(entries.size()) + " entries but the output has rank " +
                      std::to_string(block.size()) + " (per-device shape " +
                      shape_to_string(block) + ")");
  }
  for (size_t d = 0; d < entries.size(); ++d) {
    for (const std::string& name : entries[d])
      global[d] *= mesh.axes()[mesh.axis_position(name)].size;
  }
  return BlockLayout(mesh, sharding, global, where);
}

Shape BlockLayout::device_shape() const {
  Shape shape = block_;
  if (sharding_.squeezed_dim) shape.erase(shape.begin() + *sharding_.squeezed_dim);
  return shape;
}

bool BlockLayout::is_split() const { return named_axes_ != 0; }

std::vector<int64_t> BlockLayout::block_offsets(int64_t device) const {
  std::vector<int64_t> offsets(global_.size(), 0);
  for (size_t d = 0; d < entry_axes_.size(); ++d) {
    int64_t index = 0;
    for (size_t position : entry_axes_[d]) {
      index = index * mesh_->axes()[position].size + mesh_->coordinate(device, position);
    }
    offsets[d] = index * block_[d];
  }
  return offsets;
}

Buffer BlockLayout::extract(const Buffer& global, int64_t device) const {
  Buffer block = Buffer::allocate_uninitialized(global.dtype, device_shape());
  copy_block(global.bytes->data(), global_, block.bytes->data(), block_, block_offsets(device),
             dtype_num_bytes(global.dtype), true);
  return block;
}

void BlockLayout::insert(const Buffer& device_value, int64_t device, Buffer& global) const {
  copy_block(global.bytes->data(), global_, device_value.bytes->data(), block_,
             block_offsets(device), dtype_num_bytes(global.dtype), false);
}

}  // namespace pmap_engine::runtime
