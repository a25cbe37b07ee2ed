// flax.linen.Dropout (flax/linen/stochastic.py, google/flax commit 18f8f31) as a function. The
// mask and the scaling are random_ops.h's dropout, which already follows Dropout.__call__ (keep
// = bernoulli(key, 1 - rate, shape), select(keep, x / (1 - rate), 0), zeros for rate 1); this
// adds the module's `deterministic` switch. broadcast_dims (one mask shared along some axes) is
// not modelled: the mask always has x's shape, Flax's default.
#include "pmap_engine/linen.h"
#include "pmap_engine/random_ops.h"

namespace pmap_engine::linen {

Array dropout(const Array& x, double rate, const Array& key, bool deterministic) {
  // x: [...] -> [...]
  if (deterministic) return x;
  return random::dropout(key, rate, x);
}

}  // namespace pmap_engine::linen
