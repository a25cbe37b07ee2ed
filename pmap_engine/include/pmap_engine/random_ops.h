// jax.random inside traced functions: the same functions as pmap_engine/random.h's host module,
// on keys that are Arrays, so that a step function can split keys, draw dropout masks or noise
// under jit, value_and_grad and pmap, and a printed program shows where randomness enters.
//
// A key is its data as jax.random.PRNGKey returns it (a "raw" key): a u32[2] array [hi, lo].
// split() returns u32[num, 2]: one key per row; key_at(keys, i) takes row i, as `keys[i]` does
// in JAX. Every sampler takes a single u32[2] key; passing split's whole result is refused, as
// JAX refuses a key array ("use jax.vmap for batching").
//
// Each function is one primitive (random_split, random_fold_in, random_bits, random_uniform,
// random_normal) whose CPU kernel calls the host module, so values agree with it bit for bit,
// inside a jit and op by op. `partitionable` is JAX's jax_threefry_partitionable (see random.h);
// it is a param of the primitive, printed in the program. None of them is differentiable: keys
// are integers, and samples have no gradient with respect to the key.
//
// The names differ from the host module's where the arguments would not (prng_key_data vs
// prng_key); elsewhere the Array-typed key selects these overloads.
#pragma once

#include <cstdint>

#include "pmap_engine/array.h"
#include "pmap_engine/random.h"

namespace pmap_engine::random {

// jax.random.PRNGKey(seed): the key data [hi, lo] as a concrete u32[2] array (see prng_key).
Array prng_key_data(int64_t seed, bool enable_x64 = false);
// A host key as a u32[2] array, and back (the latter needs a concrete array).
Array key_data(Key key);
Key key_from_data(const Array& key);

// jax.random.split(key, num): u32[num, 2].
Array split(const Array& key, int64_t num = 2, bool partitionable = default_partitionable());
// keys[index] of split's u32[num, 2] result: a u32[2] key.
Array key_at(const Array& keys, int64_t index);

// jax.random.fold_in(key, data): the same under both layouts, so no partitionable flag. `data`
// may be a traced i32/u32 scalar (e.g. a device's axis_index); i32 is reinterpreted as u32, as
// jnp.uint32 does.
Array fold_in(const Array& key, uint32_t data);
Array fold_in(const Array& key, const Array& data);

// jax.random.bits(key, shape): u32[shape].
Array random_bits(const Array& key, const Shape& shape,
                  bool partitionable = default_partitionable());

// jax.random.uniform(key, shape, dtype, minval, maxval). Only f32 is implemented: JAX draws
// other float widths from 16- or 64-bit words, which the host module does not model.
Array uniform(const Array& key, const Shape& shape, double minval = 0.0, double maxval = 1.0,
              DType dtype = DType::f32, bool partitionable = default_partitionable());

// jax.random.normal(key, shape, dtype); f32 only, as uniform.
Array normal(const Array& key, const Shape& shape, DType dtype = DType::f32,
             bool partitionable = default_partitionable());

// jax.random.bernoulli(key, p, shape): uniform(key, shape) < p, a bool array.
Array bernoulli(const Array& key, double p, const Shape& shape,
                bool partitionable = default_partitionable());

// Inverted dropout as flax.linen.Dropout applies it: keep = bernoulli(key, 1 - rate, x.shape);
// where(keep, x / (1 - rate), 0). rate 0 returns x; rate 1 returns zeros (no mask is drawn).
Array dropout(const Array& key, double rate, const Array& x,
              bool partitionable = default_partitionable());

}  // namespace pmap_engine::random
