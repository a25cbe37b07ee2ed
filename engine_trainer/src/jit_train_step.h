// The train step under jax.jit with shardings (parallel.style jit-dp, jit-fsdp), as a JAX user
// writes it on a one-axis mesh:
//
//   mesh = Mesh(jax.devices(), ('data',))
//   @partial(jax.jit, donate_argnums=(0, 1),
//            in_shardings=(params_shardings, opt_state_shardings, P('data'), P('data')),
//            out_shardings=(params_shardings, opt_state_shardings, P(), params_shardings))
//   def train_step(params, opt_state, x, y):              # x, y: the global batch
//       loss, grads = jax.value_and_grad(loss_fn)(params, x, y)   # mean over the global batch
//       updates, opt_state = optimizer.update(grads, opt_state, params)
//       return optax.apply_updates(params, updates), opt_state, loss, grads
//
// with the shardings of jit_shardings.h. There is no pmean: the loss is the global batch's mean,
// so its gradient is the global gradient, and the collectives that make each device's part of
// it (an all-reduce of the replicated parameters' gradients under jit-dp; all-gathers of the
// split parameters and a reduce-scatter of their gradients under jit-fsdp) are the
// partitioner's, from the shardings. The step takes and returns global values (StepLayout
// {stacked_state = false, per_device_results = false, global_batch = true}); reading a result
// assembles it from the devices' blocks.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "parity/engine_trainer/mapped_train_step.h"
#include "pmap_engine/transforms.h"
#include "step_plan.h"
#include "step_signature.h"

namespace parity::engine_trainer {

// The jitted step and the shardings it is jitted with. MappedTrainStep runs it (the interface
// every mapped step has); this class holds what only a jit has.
class JitTrainStep {
 public:
  // `style` "jit-dp" or "jit-fsdp"; `separator` joins a parameter's path into its canonical name
  // (for the layout's words).
  JitTrainStep(pe::TreeFunction step, std::string style, pe::Mesh mesh, StepSignature signature,
               std::string separator);

  // The step jitted for train_step(params, opt_state, x, y[, batch_stats]), global values. The
  // shardings come from the shapes of params and opt_state (jax.tree.map(fsdp_sharding,
  // params)), so the step is jitted for the first arguments it sees, and again if their shapes
  // change.
  pe::Jitted jitted_for(const std::vector<pe::Tree>& args) const;
  // The step as last jitted; nullopt before the first call.
  std::optional<pe::Jitted> last_jitted() const;
  // How the last run's peak was measured: per device of the partitioned program.
  std::string memory_method() const;
  // What each device holds of params and opt_state under their shardings.
  DeviceStateBytes device_state_bytes(const pe::Tree& params, const pe::Tree& opt_state) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// The step of the plan's parallel.style on Mesh(devices, ('data',)). Throws InputError when the
// engine program is not the faithful "pmean" (the documents' programs are written for pmap).
JitTrainStep make_jit_train_step(const EngineStepPlan& plan, const pe::DeviceSet& devices);

}  // namespace parity::engine_trainer
