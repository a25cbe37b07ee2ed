// Which mesh axes each value of a mapped program varies along: JAX's varying-manual-axes
// ("vma") type, inferred after tracing rather than carried on every tracer. shard_map's
// check_vma uses it to prove that an output its out_specs declare replicated is the same on
// every device along the omitted axes.
//
// Rules (jax/_src/lax/parallel.py: psum_invariant_p, all_gather_invariant's docstring, and the
// collectives' abstract-eval rules):
//   input            the axes its in_spec names
//   constant         none
//   psum/pmax/pmin   the operand's axes minus the reduced axis (Varying -> Invariant)
//   all_gather       the operand's axes plus the axis (JAX: Varying -> Varying)
//   reduce_scatter,  the operand's axes plus the axis: each device holds another part or
//   ppermute         another device's value
//   axis_index       the axis
//   anything else    the union of its operands' axes
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/program.h"

namespace pmap_engine::ir {

// One bit per mesh axis; `axis_bit` maps a collective's axis_name to its bit.
std::vector<uint64_t> infer_varying_axes(
    const Program& program, const std::vector<uint64_t>& input_axes,
    const std::function<uint64_t(const std::string&)>& axis_bit);

}  // namespace pmap_engine::ir
