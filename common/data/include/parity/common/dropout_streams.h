// Where a layers model's dropout masks come from, shared by both producers so that they draw from
// one stream when the case asks (rng.ddp = "threefry"): the model's dropout sites, named by
// module path as Flax names them (dropout_sites.h), and the keys a JAX user's step derives for
// each step, device and site from the case's [rng] (docs/rng.md, "Dropout streams").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/dropout_sites.h"
#include "pmap_engine/random.h"

namespace parity {

// The keys of one run, step by step.
class DropoutKeys {
 public:
  explicit DropoutKeys(const RngSpec& rng);

  // Step `step`'s key from PRNGKey(rng.seed) (rng.per_step): fold_in(root, step); a carried key
  // split every step (key, subkey = jax.random.split(key)), the subkey used; or the root key at
  // every step (R2). Call once per step, in order.
  pmap_engine::random::Key next_step_key(int64_t step);

  // Device `device`'s "dropout" rng from the step key (rng.per_device): fold_in(key, device) as
  // fold_in(key, axis_index("data")) computes it inside the step; row `device` of split(key,
  // num_devices); or the step key itself (P5).
  pmap_engine::random::Key device_key(pmap_engine::random::Key step_key, int64_t device,
                                      int64_t num_devices) const;

  // The key Flax's Dropout module at `site` draws from: make_rng("dropout"), its first call.
  static pmap_engine::random::Key site_key(pmap_engine::random::Key device_key,
                                           const std::string& site);

 private:
  RngSpec rng_;
  pmap_engine::random::Key carried_;
};

}  // namespace parity
