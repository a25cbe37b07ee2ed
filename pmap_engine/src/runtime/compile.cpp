#include "runtime/compile.h"

#include "runtime/loop_fusion.h"
#include "runtime/transposed_dots.h"

namespace pmap_engine::runtime {

std::shared_ptr<const Executable> compile(const ir::Program& program) {
  auto executable = std::make_shared<Executable>();
  executable->program = program;
  fold_transposed_dots(*executable);
  fuse_elementwise_loops(*executable);
  return executable;
}

}  // namespace pmap_engine::runtime
