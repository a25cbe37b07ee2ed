#include "dropout_stream.h"

#include <ATen/CPUGeneratorImpl.h>

namespace parity::ddp_ref {
namespace {

namespace pr = pmap_engine::random;

// x's layout as Flax holds it: NCHW images go channels-last.
torch::Tensor to_flax_layout(const torch::Tensor& x) {
  return x.dim() == 4 ? x.permute({0, 2, 3, 1}) : x;
}

std::vector<uint8_t> mask_bytes(const torch::Tensor& keep) {
  const torch::Tensor flat = to_flax_layout(keep).contiguous().to(torch::kUInt8).flatten();
  return {flat.data_ptr<uint8_t>(), flat.data_ptr<uint8_t>() + flat.numel()};
}

uint64_t torch_seed(const RngSpec& rng, int64_t rank) {
  return rng.torch_seed == "seed" ? rng.seed : rng.seed + static_cast<uint64_t>(rank);
}

}  // namespace

DropoutStream::DropoutStream(const CaseSpec& spec, int64_t rank, int64_t world_size)
    : rng_(spec.rng),
      rank_(rank),
      world_size_(world_size),
      keys_(spec.rng),
      generator_(at::detail::createCPUGenerator(torch_seed(spec.rng, rank))) {}

void DropoutStream::begin_step(int64_t step) {
  step_ = step;
  draws_.clear();
  const pr::Key step_key = keys_.next_step_key(step);
  device_key_ = keys_.device_key(step_key, rank_, world_size_);
}

// jax.random.bernoulli(key, 1 - rate, shape): uniform(key, shape) < float32(1 - rate), in
// Flax's layout, brought to x's.
torch::Tensor DropoutStream::keep_mask(const DropoutSite& site, const torch::Tensor& x,
                                       std::optional<RngKeyWords>& key) {
  if (rng_.ddp == "torch") {
    return torch::empty_like(x).bernoulli_(1 - site.rate, generator_);
  }
  const pr::Key site_key = DropoutKeys::site_key(device_key_, site.path);
  key = RngKeyWords{site_key.hi, site_key.lo};
  const std::vector<int64_t> shape = to_flax_layout(x).sizes().vec();
  const std::vector<float> u =
      pr::uniform(site_key, pr::Shape(shape.begin(), shape.end()), 0.0f, 1.0f,
                  pr::default_partitionable());
  const auto keep_prob = static_cast<float>(1 - site.rate);
  torch::Tensor keep = torch::empty(shape, x.options());
  float* out = keep.data_ptr<float>();
  for (size_t i = 0; i < u.size(); ++i) out[i] = u[i] < keep_prob ? 1.0f : 0.0f;
  return x.dim() == 4 ? keep.permute({0, 3, 1, 2}) : keep;
}

torch::Tensor DropoutStream::apply(const DropoutSite& site, const torch::Tensor& x) {
  std::optional<RngKeyWords> key;
  torch::Tensor noise = keep_mask(site, x, key);
  draws_.push_back(summarise_mask(step_, rank_, site.path, site.rate, mask_bytes(noise), key));
  noise.div_(1 - site.rate);
  return x * noise;
}

std::vector<MaskDraw> DropoutStream::take_draws() { return std::move(draws_); }

}  // namespace parity::ddp_ref
