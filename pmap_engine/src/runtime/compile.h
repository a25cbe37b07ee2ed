// What happens to a traced program before it runs, as XLA compiles a jaxpr's HLO: passes that
// change how the program computes, never what (each pass's header says how its bits relate to
// the traced program's). The traced program itself stays what jax.make_jaxpr shows.
//   1. transposed_dots.h   a transpose of a matrix product becomes the product with its
//                          operands swapped (no transposed copy)
//   2. loop_fusion.h       connected element-wise ops run as one loop over the data
#pragma once

#include <memory>
#include <vector>

#include "ir/program.h"

namespace pmap_engine::runtime {

// A program ready to run, and the primitives its fusions use (owned here).
struct Executable {
  ir::Program program;
  std::vector<std::unique_ptr<ir::Primitive>> fusions;
  int64_t folded_transposes = 0;  // transposes of a product folded into it
  int64_t fused_equations = 0;    // traced equations now inside a fusion
};

std::shared_ptr<const Executable> compile(const ir::Program& program);

}  // namespace pmap_engine::runtime
