// jax.random on Array keys: primitives whose kernels call the host module (random.h), so the
// values are the host module's bit for bit wherever they are computed. JAX's own primitives
// are random_split[shape], random_fold_in and random_bits[bit_width, shape] on typed keys
// (jax/_src/random/prng.py); raw u32[2] keys are wrapped and unwrapped around them. Here the
// key data itself is the operand, and uniform/normal are single primitives too (JAX composes
// them from random_bits and bit tricks in jax/_src/random/core.py; the host module models that
// composition exactly).
//
// Vocabulary as in random.h: key = u32[2] [hi, lo]; keys = u32[num, 2], one key per row.
// None of the primitives has a VJP: keys are integers, and a sample has no gradient with
// respect to its key.
#include "pmap_engine/random_ops.h"

#include <algorithm>
#include <string>

#include "ir/primitive.h"
#include "pmap_engine/ops.h"

namespace pmap_engine::random {
namespace {

using ir::AbstractValue;
using ir::Params;

std::string type_of(const AbstractValue& value) { return type_to_string(value.dtype, value.shape); }

// JAX's _check_prng_key(allow_batched=False): one key, not a key array.
void check_single_key(const char* op, const AbstractValue& key) {
  if (key.dtype != DType::u32 || key.shape.empty() || key.shape.back() != 2) {
    throw EngineError(std::string(op) + ": expected a key, the u32[2] data that " +
                      "prng_key_data, fold_in or key_at give, but got " + type_of(key));
  }
  if (key.shape.size() != 1) {
    throw EngineError(std::string(op) + " accepts a single key, but was given a key array " +
                      type_of(key) + ". Take one key with key_at(keys, i) (JAX: use " +
                      "jax.vmap for batching).");
  }
}

void check_sample_shape(const char* op, const Shape& shape) {
  for (int64_t dim : shape) {
    if (dim < 0) {
      throw EngineError(std::string(op) + ": negative dimension in shape " +
                        shape_to_string(shape));
    }
  }
}

void check_float32(const char* op, DType dtype) {
  if (dtype != DType::f32) {
    throw EngineError(std::string(op) + ": only dtype f32 is implemented, got " +
                      dtype_name(dtype) + " (JAX draws " + dtype_name(dtype) +
                      " samples from words of another bit width); draw f32 and astype");
  }
}

Key key_of(const Buffer& key) { return Key{key.data<uint32_t>()[0], key.data<uint32_t>()[1]}; }

// Keys as u32 words [hi, lo, hi, lo, ...] in a buffer of `shape`.
Buffer keys_buffer(const std::vector<Key>& keys, const Shape& shape) {
  Buffer out = Buffer::allocate(DType::u32, shape);
  auto* words = out.data<uint32_t>();
  for (size_t i = 0; i < keys.size(); ++i) {
    words[2 * i] = keys[i].hi;
    words[2 * i + 1] = keys[i].lo;
  }
  return out;
}

template <typename T>
std::vector<Buffer> values_buffer(DType dtype, const Shape& shape, const std::vector<T>& values) {
  Buffer out = Buffer::allocate(dtype, shape);
  std::copy(values.begin(), values.end(), out.data<T>());
  return {out};
}

// random_split[shape=(num,) partitionable]: key u32[2] -> keys u32[num, 2].
const ir::Primitive* kSplit = ir::register_primitive({
    "random_split",
    [](const std::vector<AbstractValue>& in, const Params& params) {
      check_single_key("split", in[0]);
      const int64_t num = params.ints("shape").at(0);
      return std::vector<AbstractValue>{{DType::u32, {num, 2}}};
    },
    [](const std::vector<const Buffer*>& in, const Params& params) {
      const int64_t num = params.ints("shape").at(0);
      return std::vector<Buffer>{
          keys_buffer(split(key_of(*in[0]), num, params.flag("partitionable")), {num, 2})};
    },
    nullptr,
});

// random_fold_in: key u32[2], data u32[] or i32[] -> key u32[2].
const ir::Primitive* kFoldIn = ir::register_primitive({
    "random_fold_in",
    [](const std::vector<AbstractValue>& in, const Params&) {
      check_single_key("fold_in", in[0]);
      const AbstractValue& data = in[1];
      if (!data.shape.empty() || (data.dtype != DType::u32 && data.dtype != DType::i32)) {
        throw EngineError("fold_in accepts a scalar integer (u32[] or i32[]), but was given " +
                          type_of(data) + " (JAX: use jax.vmap for batching)");
      }
      return std::vector<AbstractValue>{{DType::u32, {2}}};
    },
    [](const std::vector<const Buffer*>& in, const Params&) {
      // i32 data keeps its 32 bits, as jnp.asarray(data, dtype='uint32') converts.
      const uint32_t data = in[1]->dtype == DType::u32
                                ? in[1]->data<uint32_t>()[0]
                                : static_cast<uint32_t>(in[1]->data<int32_t>()[0]);
      return std::vector<Buffer>{keys_buffer({fold_in(key_of(*in[0]), data)}, {2})};
    },
    nullptr,
});

// random_bits[bit_width=32 shape partitionable]: key u32[2] -> u32[shape].
const ir::Primitive* kBits = ir::register_primitive({
    "random_bits",
    [](const std::vector<AbstractValue>& in, const Params& params) {
      check_single_key("random_bits", in[0]);
      return std::vector<AbstractValue>{{DType::u32, params.ints("shape")}};
    },
    [](const std::vector<const Buffer*>& in, const Params& params) {
      const Shape& shape = params.ints("shape");
      return values_buffer(DType::u32, shape,
                           random_bits(key_of(*in[0]), shape, params.flag("partitionable")));
    },
    nullptr,
});

// random_uniform[shape minval maxval partitionable]: key u32[2] -> f32[shape].
const ir::Primitive* kUniform = ir::register_primitive({
    "random_uniform",
    [](const std::vector<AbstractValue>& in, const Params& params) {
      check_single_key("uniform", in[0]);
      return std::vector<AbstractValue>{{DType::f32, params.ints("shape")}};
    },
    [](const std::vector<const Buffer*>& in, const Params& params) {
      const Shape& shape = params.ints("shape");
      // minval and maxval become f32 first, as JAX converts them to the sample dtype.
      const auto minval = static_cast<float>(params.real("minval"));
      const auto maxval = static_cast<float>(params.real("maxval"));
      return values_buffer(
          DType::f32, shape,
          uniform(key_of(*in[0]), shape, minval, maxval, params.flag("partitionable")));
    },
    nullptr,
});

// random_normal[shape partitionable]: key u32[2] -> f32[shape].
const ir::Primitive* kNormal = ir::register_primitive({
    "random_normal",
    [](const std::vector<AbstractValue>& in, const Params& params) {
      check_single_key("normal", in[0]);
      return std::vector<AbstractValue>{{DType::f32, params.ints("shape")}};
    },
    [](const std::vector<const Buffer*>& in, const Params& params) {
      const Shape& shape = params.ints("shape");
      return values_buffer(DType::f32, shape,
                           normal(key_of(*in[0]), shape, params.flag("partitionable")));
    },
    nullptr,
});

}  // namespace

Array key_data(Key key) { return Array::from_uints({2}, {key.hi, key.lo}); }

Array prng_key_data(int64_t seed, bool enable_x64) { return key_data(prng_key(seed, enable_x64)); }

Key key_from_data(const Array& key) {
  check_single_key("key_from_data", {key.dtype(), key.shape()});
  return key_of(key.buffer("key_from_data"));
}

Array split(const Array& key, int64_t num, bool partitionable) {
  if (num < 0) {
    throw EngineError("split: the number of keys must be non-negative, got " + std::to_string(num));
  }
  return ir::bind1(*kSplit, {key},
                   {{"shape", std::vector<int64_t>{num}}, {"partitionable", partitionable}});
}

Array key_at(const Array& keys, int64_t index) {
  // keys: [num, 2] -> [2]
  if (keys.dtype() != DType::u32 || keys.ndim() != 2 || keys.shape()[1] != 2) {
    throw EngineError("key_at: expected split's keys u32[num,2], got " +
                      type_to_string(keys.dtype(), keys.shape()));
  }
  const int64_t num_keys = keys.shape()[0];
  if (index < -num_keys || index >= num_keys) {
    throw EngineError("key_at: index " + std::to_string(index) + " is out of bounds for " +
                      std::to_string(num_keys) + " keys");
  }
  const int64_t row = index < 0 ? index + num_keys : index;
  return reshape(slice(keys, {row, 0}, {row + 1, 2}), {2});
}

Array fold_in(const Array& key, uint32_t data) {
  return fold_in(key, Array::from_uints({}, {data}));
}

Array fold_in(const Array& key, const Array& data) { return ir::bind1(*kFoldIn, {key, data}); }

Array random_bits(const Array& key, const Shape& shape, bool partitionable) {
  check_sample_shape("random_bits", shape);
  return ir::bind1(
      *kBits, {key},
      {{"bit_width", int64_t{32}}, {"shape", shape}, {"partitionable", partitionable}});
}

Array uniform(const Array& key, const Shape& shape, double minval, double maxval, DType dtype,
              bool partitionable) {
  check_sample_shape("uniform", shape);
  check_float32("uniform", dtype);
  return ir::bind1(
      *kUniform, {key},
      {{"shape", shape}, {"minval", minval}, {"maxval", maxval}, {"partitionable", partitionable}});
}

Array normal(const Array& key, const Shape& shape, DType dtype, bool partitionable) {
  check_sample_shape("normal", shape);
  check_float32("normal", dtype);
  return ir::bind1(*kNormal, {key}, {{"shape", shape}, {"partitionable", partitionable}});
}

// jax/_src/random/core.py _bernoulli (mode 'low'): uniform(key, shape, dtype(p)) < p; a Python
// float p makes the samples f32 and is itself rounded to f32 for the comparison.
Array bernoulli(const Array& key, double p, const Shape& shape, bool partitionable) {
  const Array u = uniform(key, shape, 0.0, 1.0, DType::f32, partitionable);
  return less(u, scalar_like(u, p));
}

Array dropout(const Array& key, double rate, const Array& x, bool partitionable) {
  // x: [...]
  if (!(rate >= 0.0 && rate <= 1.0)) {
    throw EngineError("dropout: rate must lie in [0, 1], got " + std::to_string(rate));
  }
  if (rate == 0.0) return x;
  if (rate == 1.0) return zeros_like(x);  // flax: avoids 0 * inf gradients
  const double keep_probability = 1.0 - rate;
  const Array keep = bernoulli(key, keep_probability, x.shape(), partitionable);
  return where(keep, x / keep_probability, zeros_like(x));
}

}  // namespace pmap_engine::random
