// Primitives: the operations programs are made of (JAX's lax level). Every primitive is
// defined in one place (pmap_engine/src/ops/*.cpp) with everything the engine needs of it:
//   - abstract_eval: output dtypes and shapes from input dtypes, shapes and params; shape and
//     dtype errors are raised here, naming the op and both operands;
//   - kernel: the CPU computation on concrete buffers;
//   - vjp: the reverse-mode rule, written with the public ops so that the backward pass is
//     itself traced (and printed) like any other code. Null for non-differentiable
//     primitives (integer and boolean results, random bits).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/params.h"
#include "pmap_engine/array.h"

namespace pmap_engine::ir {

// The mesh axes a value varies along, in the order the maps bound them (ir/varying_axes.h).
using VaryingAxes = std::vector<std::string>;

struct AbstractValue {
  DType dtype = DType::f32;
  Shape shape;
  // JAX's aval.mat.varying: set by the trace under shard_map(check_vma=True) only
  // (ir/varying_axes.h); abstract_eval rules neither read nor set it.
  VaryingAxes varying = {};
};

// What a VJP rule receives: the equation's inputs and outputs (tracers or concrete arrays),
// its params, the cotangent of each output (an invalid Array where an output has none), and
// which inputs need a cotangent at all (a rule may skip the others: JAX's transpose rules
// likewise only produce cotangents for linear inputs). It returns one cotangent per input (an
// invalid Array for "zero / not differentiable / not needed").
struct VjpArgs {
  const std::vector<Array>& inputs;
  const std::vector<Array>& outputs;
  const Params& params;
  const std::vector<Array>& output_cotangents;
  std::vector<bool> needs_cotangent = {};  // empty: all inputs

  bool needs(size_t input) const {
    return needs_cotangent.empty() || (input < needs_cotangent.size() && needs_cotangent[input]);
  }
};

// An element-wise primitive's f32 computation over a block of `n` elements, for loop fusion
// (runtime/loop_fusion.h): operand i is operands[i][0 .. n), or the single value operands[i][0]
// where scalar[i]. It computes exactly what the kernel computes for f32, element for element.
// A pred (bool) operand or result is 0 or 1 in f32 there (comparisons, select_n's predicate).
using F32Block = void (*)(const float* const* operands, const bool* scalar, float* out, size_t n);

struct Primitive {
  std::string name;
  std::function<std::vector<AbstractValue>(const std::vector<AbstractValue>&, const Params&)>
      abstract_eval;
  std::function<std::vector<Buffer>(const std::vector<const Buffer*>&, const Params&)> kernel;
  std::function<std::vector<Array>(const VjpArgs&)> vjp;
  // Each output element depends only on the same element of each same-shaped input, and the
  // kernel reads it before writing it: an input that dies here may be overwritten in place.
  bool elementwise = false;
  // Set for the element-wise primitives without params that loop fusion may fuse in f32.
  F32Block f32_block = nullptr;
  // Where not 0, the only operand count f32_block takes (select_n's: a predicate, two cases).
  size_t f32_block_arity = 0;
  // Collectives (psum, all_gather, axis_index, ...) compute every device's outputs from every
  // device's inputs along a mapped axis, in device order: per_device_inputs[d][i] is input i
  // on device d; the result is [d][output]. `kernel` stays null for them. They run only
  // inside a mapped program (pmap); their params name the axis ("axis_name") and carry its
  // size ("axis_size").
  std::function<std::vector<std::vector<Buffer>>(
      const std::vector<std::vector<const Buffer*>>& per_device_inputs, const Params&)>
      collective_kernel = {};
};

// Registers a primitive at static-initialisation time; see REGISTER_PRIMITIVE.
const Primitive* register_primitive(Primitive primitive);
const Primitive& find_primitive(const std::string& name);

// Applies a primitive to arrays: records an equation when any input is a tracer of an active
// trace, otherwise runs the kernel at once (op-by-op, like JAX outside jit).
std::vector<Array> bind(const Primitive& primitive, const std::vector<Array>& inputs,
                        const Params& params = {});
Array bind1(const Primitive& primitive, const std::vector<Array>& inputs,
            const Params& params = {});

}  // namespace pmap_engine::ir
