#include "device_trees.h"

#include <cmath>
#include <cstring>

#include "parity/engine_trainer/engine_trainer.h"
#include "pmap_engine/ops.h"

namespace parity::engine_trainer {

pe::Tree stack(const std::vector<pe::Tree>& per_device) {
  std::vector<std::vector<pe::Array>> leaves;
  for (const pe::Tree& tree : per_device) leaves.push_back(tree.leaves());
  size_t leaf = 0;
  return pe::tree_map(
      [&](const pe::Array&) {
        const pe::Buffer& first = leaves.front()[leaf].buffer();
        pe::Shape shape = first.shape;
        shape.insert(shape.begin(), static_cast<int64_t>(per_device.size()));
        pe::Buffer stacked = pe::Buffer::allocate(first.dtype, shape);
        for (size_t d = 0; d < per_device.size(); ++d) {
          std::memcpy(stacked.bytes->data() + d * first.num_bytes(),
                      leaves[d][leaf].buffer().bytes->data(), first.num_bytes());
        }
        ++leaf;
        return pe::Array(stacked);
      },
      per_device.front());
}

pe::Tree device_slice(const pe::Tree& tree, int64_t d) {
  return pe::tree_map(
      [d](const pe::Array& leaf) {
        const pe::Buffer& source = leaf.buffer();
        pe::Shape shape(source.shape.begin() + 1, source.shape.end());
        pe::Buffer slice = pe::Buffer::allocate(source.dtype, shape);
        std::memcpy(slice.bytes->data(),
                    source.bytes->data() + static_cast<size_t>(d) * slice.num_bytes(),
                    slice.num_bytes());
        return pe::Array(slice);
      },
      tree);
}

pe::Tree merge_device_axis(const pe::Tree& stacked) {
  return pe::tree_map(
      [](const pe::Array& leaf) {
        pe::Shape shape(leaf.shape().begin() + 1, leaf.shape().end());
        shape.front() *= leaf.shape().front();
        return pe::reshape(leaf, shape);
      },
      stacked);
}

double global_l2_norm(const pe::Tree& tree) {
  double sum_of_squares = 0;
  for (const auto& leaf : tree.leaves()) {
    for (double value : leaf.to_doubles()) sum_of_squares += value * value;
  }
  return std::sqrt(sum_of_squares);
}

pe::Tree replicate(const pe::Tree& tree, int64_t num_devices) {
  return stack(std::vector<pe::Tree>(static_cast<size_t>(num_devices), tree));
}

}  // namespace parity::engine_trainer
