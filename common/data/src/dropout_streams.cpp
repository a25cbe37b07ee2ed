#include "parity/common/dropout_streams.h"

#include "parity/common/flax_rng.h"
#include "parity/common/model_layers.h"

namespace parity {

namespace pr = pmap_engine::random;

DropoutKeys::DropoutKeys(const RngSpec& rng)
    : rng_(rng), carried_(pr::prng_key(static_cast<int64_t>(rng.seed))) {}

pr::Key DropoutKeys::next_step_key(int64_t step) {
  const pr::Key root = pr::prng_key(static_cast<int64_t>(rng_.seed));
  if (rng_.per_step == "fold_in") return pr::fold_in(root, static_cast<uint32_t>(step));
  if (rng_.per_step == "split") {
    const std::vector<pr::Key> halves = pr::split(carried_, 2, pr::default_partitionable());
    carried_ = halves[0];
    return halves[1];
  }
  return root;
}

pr::Key DropoutKeys::device_key(pr::Key step_key, int64_t device, int64_t num_devices) const {
  if (rng_.per_device == "fold_in") return pr::fold_in(step_key, static_cast<uint32_t>(device));
  if (rng_.per_device == "split") {
    return pr::split(step_key, num_devices, pr::default_partitionable())
        [static_cast<size_t>(device)];
  }
  return step_key;
}

pr::Key DropoutKeys::site_key(pr::Key device_key, const std::string& site) {
  return pr::fold_in(device_key, flax_make_rng_data(split_module_path(site), 1));
}

}  // namespace parity
