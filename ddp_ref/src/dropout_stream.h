// One rank's dropout masks, drawn as the case's rng.ddp says, and what it drew each step:
//   torch     torch.nn.Dropout's draw (ATen's _dropout_impl, aten/src/ATen/native/Dropout.cpp):
//             noise = empty_like(x).bernoulli_(1 - p), noise /= 1 - p, x * noise, from the
//             rank's own generator seeded with seed + rank (or seed on every rank: R1). The
//             ranks are threads of one process here, so each has a generator of its own where
//             separate processes would each have their default one.
//   threefry  the same noise and product, the keep mask taken from the engine's key for this
//             step, device and site (DropoutKeys) as jax.random.bernoulli draws it, so that
//             ddp_ref and the engine drop the same units.
// Masks are recorded in Flax's layout (NHWC for images), where the engine records them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/dropout_streams.h"
#include "parity/common/rng_streams.h"
#include "torch_pch.h"

namespace parity::ddp_ref {

class DropoutStream {
 public:
  DropoutStream(const CaseSpec& spec, int64_t rank, int64_t world_size);

  // Before each training step's forward, in step order.
  void begin_step(int64_t step);
  // The training forward of the dropout layer at `site` (a path of dropout_sites).
  torch::Tensor apply(const DropoutSite& site, const torch::Tensor& x);
  // The masks drawn since begin_step, in the order the layers applied them.
  std::vector<MaskDraw> take_draws();

 private:
  torch::Tensor keep_mask(const DropoutSite& site, const torch::Tensor& x,
                          std::optional<RngKeyWords>& key);

  RngSpec rng_;
  int64_t rank_;
  int64_t world_size_;
  DropoutKeys keys_;
  pmap_engine::random::Key device_key_{};
  at::Generator generator_;
  int64_t step_ = 0;
  std::vector<MaskDraw> draws_;
};

}  // namespace parity::ddp_ref
