// Named-axis collectives, as jax.lax's parallel operators (jax/_src/lax/parallel.py). Inside a
// function mapped by pmap with options.axis_name = "data", every array is one device's value;
// a collective over "data" combines the values of all devices on that axis:
//
//   psum(x, "data")                  every device gets x_0 + x_1 + ... + x_{N-1}
//   pmean(x, "data")                 psum(x) / N
//   pmax / pmin(x, "data")           the element-wise max / min over devices
//   all_gather(x, "data")            every device gets [x_0, ..., x_{N-1}] stacked on `axis`
//                                    (tiled: concatenated along `axis`)
//   psum_scatter(x, "data")          device r gets psum(x)[r] (tiled: the r-th block along
//                                    `scatter_dimension`); JAX's reduce_scatter primitive
//   ppermute(x, "data", {{s, d}})    device d gets x_s; devices nobody sends to get zeros
//   axis_index("data")               this device's position on the axis, an i32 scalar
//   axis_size("data")                N, a host integer (known while tracing)
//
// Sums are folded in device order (device 0 + device 1 + ... left to right), so results are
// bitwise identical across runs and thread counts, and every device holds the same bits.
//
// Under grad, the collectives transpose as JAX defines them under pmap: psum's cotangent is a
// psum (so a psum applied to the loss inside grad scales the gradient by N: pitfall P3),
// all_gather and psum_scatter transpose into each other, ppermute into the inverse permutation.
// pmax/pmin have no differentiation rule in JAX and raise here too.
//
// An axis name no enclosing pmap binds raises JAX's "unbound axis name" error (pitfall P1).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pmap_engine/array.h"
#include "pmap_engine/tree.h"

namespace pmap_engine {

// All-reduces. The Tree forms reduce every leaf with one primitive (as jax.lax.psum binds one
// psum_p over the flattened leaves), so a gradient tree's reduction is one line of the program.
// bool inputs of psum/pmean are summed as i32, as JAX does.
Array psum(const Array& x, const std::string& axis_name);
Tree psum(const Tree& x, const std::string& axis_name);
// psum(x) / N in x's dtype (jax.lax.pmean: `v / n` with n a Python int); integer and bool
// inputs give f32, as the true division of an integer array by an int does in JAX.
Array pmean(const Array& x, const std::string& axis_name);
Tree pmean(const Tree& x, const std::string& axis_name);
Array pmax(const Array& x, const std::string& axis_name);
Tree pmax(const Tree& x, const std::string& axis_name);
Array pmin(const Array& x, const std::string& axis_name);
Tree pmin(const Tree& x, const std::string& axis_name);

// x: [...] -> tiled=false: [..., N (at axis), ...]; tiled=true: x's shape with shape[axis] * N.
// A negative axis counts from the end of the output (untiled) or of x (tiled).
Array all_gather(const Array& x, const std::string& axis_name, int64_t axis = 0,
                 bool tiled = false);

// x: [..., N (at scatter_dimension), ...] -> x's shape without that dimension (tiled=false), or
// x: [..., N*K, ...] -> [..., K, ...] (tiled=true). Device r keeps block r of the sum.
Array psum_scatter(const Array& x, const std::string& axis_name, int64_t scatter_dimension = 0,
                   bool tiled = false);

// perm: (source, destination) pairs of axis indices; sources unique, destinations unique.
Array ppermute(const Array& x, const std::string& axis_name,
               const std::vector<std::pair<int64_t, int64_t>>& perm);

// This device's index on the axis: i32[].
Array axis_index(const std::string& axis_name);
// The axis's size N (jax.lax.axis_size; psum(1, axis_name) in older JAX).
int64_t axis_size(const std::string& axis_name);

// What the all-reduces (psum, pmean, pmax, pmin) move between devices while an instance lives:
// bytes sent and received by each position on the reduced axis, summed over calls and over the
// device groups of a mesh. The devices share the host's memory, and a reduction is a reduce to
// device 0 then a broadcast from it (collectives.cpp, "Reductions"): every other device's
// operand is read into device 0's output, and the result copied from there into each other
// device's output. A transfer is counted once for the device whose buffer it leaves (sent) and
// once for the device whose buffer it reaches (received). One instance at a time.
class ReductionTraffic {
 public:
  ReductionTraffic();
  ~ReductionTraffic();
  ReductionTraffic(const ReductionTraffic&) = delete;
  ReductionTraffic& operator=(const ReductionTraffic&) = delete;

  // Indexed by position on the axis; as long as the largest position that took part.
  std::vector<int64_t> sent_bytes() const;
  std::vector<int64_t> received_bytes() const;
};

}  // namespace pmap_engine
