// The sharding_constraint primitive behind with_sharding_constraint (pmap_engine/sharding.h).
#pragma once

#include "ir/params.h"
#include "pmap_engine/sharding.h"

namespace pmap_engine {

// The sharding a sharding_constraint equation's params name.
const NamedSharding& constraint_sharding(const ir::Params& params);

}  // namespace pmap_engine
