// sharding_constraint[sharding=...]: the identity on values, a sharding for the partitioner.
// jax/_src/pjit.py (jax-v0.11.0): with_sharding_constraint checks each leaf with
// pjit_check_aval_sharding(..., "with_sharding_constraint arguments",
// allow_uneven_sharding=True) (a spec longer than the rank is refused, an indivisible dim is
// not) and binds sharding_constraint_p, whose transpose constrains the cotangent to the same
// sharding (_sharding_constraint_transpose_rule).
#include "ops/sharding_constraint.h"

#include <map>
#include <mutex>
#include <string>

#include "ir/primitive.h"

namespace pmap_engine {
namespace {

// The params hold the sharding's repr; the registry maps it back to the sharding. The repr
// names the mesh's axes, not its devices: two meshes of the same axes share an entry.
std::mutex registry_mutex;
std::map<std::string, NamedSharding>& registry() {
  static std::map<std::string, NamedSharding> shardings;
  return shardings;
}

const ir::Primitive* kShardingConstraint = ir::register_primitive({
    "sharding_constraint",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params&) {
      if (inputs.size() != 1) throw EngineError("sharding_constraint: expected 1 operand");
      return inputs;
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params&) {
      Buffer copy = Buffer::allocate_uninitialized(inputs[0]->dtype, inputs[0]->shape);
      std::copy(inputs[0]->bytes->data(), inputs[0]->bytes->data() + inputs[0]->num_bytes(),
                copy.bytes->data());
      return std::vector<Buffer>{copy};
    },
    [](const ir::VjpArgs& args) {
      return std::vector<Array>{
          with_sharding_constraint(args.output_cotangents[0], constraint_sharding(args.params))};
    },
});

}  // namespace

const NamedSharding& constraint_sharding(const ir::Params& params) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return registry().at(params.text("sharding"));
}

Array with_sharding_constraint(const Array& x, const NamedSharding& sharding) {
  sharding.check_leaf(x.shape(), "with_sharding_constraint arguments", /*allow_uneven=*/true);
  if (!x.is_traced()) return x;  // outside jit: a placement of the same values
  const std::string text = sharding.to_string();
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry().emplace(text, sharding);
  }
  return ir::bind1(*kShardingConstraint, {x}, {{"sharding", text}});
}

}  // namespace pmap_engine
