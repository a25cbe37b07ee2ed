// Stand-in for a header that Debian's libtorch-dev 1.13.1 does not ship.
//
// Why: torch/csrc/distributed/c10d/reducer.hpp includes this header, but Debian packages only
// the c10d part of torch/csrc/distributed, not the RPC-based distributed autograd. The Reducer
// uses two names from it, and only in declarations that parity never calls (the
// distributed-autograd gradient path, taken when a backward runs inside a dist_autograd context):
//   - DistAutogradContext::GradCallback, a std::function<bool(at::Tensor&)>
//   - ContextPtr, a std::shared_ptr<DistAutogradContext>
// Declaring them with the same types as upstream keeps every Reducer symbol's mangled name and
// layout identical to the one compiled into libtorch_cpu.so (upstream declares GradCallback in
// torch/csrc/distributed/autograd/context/context.h of PyTorch 1.13). Nothing here is defined:
// the class stays incomplete beyond these aliases, so no object of it can be made by mistake.
#pragma once

#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>

namespace torch {
namespace distributed {
namespace autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;

  DistAutogradContext() = delete;
};

using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch
