// Which mesh axes each value of a shard_map'd program varies along: JAX's varying-manual-axes
// ("vma") type, aval.mat.varying in jax/_src/core.py (jax-v0.11.0). Only shard_map with
// check_vma=True types values (JAX's config._check_vma); under pmap (check_vma=False) every type
// is empty, as JAX's collective_vma_rule and standard_vma_rule return frozenset() there.
//
// The trace carries the types rather than an inference after tracing: every variable gets its
// type when the trace creates it (AbstractValue::varying). Autodiff needs them while the
// program is being built, for two reasons. The arguments of a function given to grad are
// tracers of the enclosing shard_map, so their types come from that trace at the moment grad
// is called. And JAX inserts pvary when an op is bound (below), so that the pvary is an
// equation of the primal program whose transpose is a psum; an inference after tracing would
// find no equation to transpose. shard_map's out_specs check reads the same types.
//
// Rules (jax/_src/lax/parallel.py unless noted):
//   input            the axes its in_spec names
//   constant         none
//   pvary            the operand's axes plus its axes (_pvary_abstract_eval)
//   psum_invariant,  the operand's axes minus the reduced axis (_psum_invariant_abstract_eval;
//   pmax, pmin       _pmin_pmax_abstract_eval): Varying -> Invariant
//   all_gather,      the operand's axes, which include the axis (collective_vma_rule, through
//   reduce_scatter,  _all_gather_effectful_abstract_eval, _reduce_scatter_effectful_abstract_eval,
//   ppermute         _raise_to_shaped_abstract_eval): Varying -> Varying
//   axis_index       the axis (_axis_index_effectful_abstract_eval)
//   anything else    the operands' axes, equal after the implicit pvary (core.standard_vma_rule)
//
// Implicit pvary (config.auto_pcast, default True): before an op is bound, an operand that
// lacks some of the axes is pvary'd along them. For ordinary ops the axes are those any
// operand varies along (core.auto_insert_reshard, called by lax.add, lax.mul, dot_general and
// the other n-ary ops); for a collective, its axis (insert_collective_pvary, bind_psum_invariant).
#pragma once

#include <string>
#include <vector>

#include "ir/primitive.h"

namespace pmap_engine::ir {

// Whether values are typed: the innermost map was bound by shard_map(check_vma=True).
bool checking_vma();

// The union and difference of axis sets, in the order the maps bound the axes (mesh order, as
// JAX's order_wrt_mesh).
VaryingAxes with_axes(const VaryingAxes& axes, const VaryingAxes& more);
VaryingAxes without_axes(const VaryingAxes& axes, const VaryingAxes& fewer);

// An axis tuple as JAX prints it, ('x',) or ('x', 'y'), and the names in one.
std::string axes_tuple_text(const VaryingAxes& axes);
VaryingAxes axes_in_tuple(const std::string& text);

// The type of an equation's outputs from its operands' types (the rules above). A variadic
// collective gets one type for all its outputs; under check_vma psum binds one per leaf.
VaryingAxes output_varying(const Primitive& primitive, const Params& params,
                           const std::vector<VaryingAxes>& inputs);

// The operands as `primitive` is bound with them: the implicit pvary above. Unchanged when not
// checking_vma().
std::vector<Array> insert_pvary(const Primitive& primitive, const Params& params,
                                std::vector<Array> inputs);

// `value` pvary'd along those of `axes` it does not vary along yet; `value` itself when none.
Array vary(const Array& value, const VaryingAxes& axes);

}  // namespace pmap_engine::ir
