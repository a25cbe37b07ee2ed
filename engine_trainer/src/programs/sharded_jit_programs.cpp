// The jit programs of scenario_programs.h (S5, P12): seed 002 §2.2's train step, jitted with
// NamedSharding instead of pmapped:
//
//   mesh = jax.sharding.Mesh(devices, ('data',))
//   data_sharding = NamedSharding(mesh, P('data'))
//   @partial(jax.jit, in_shardings=(data_sharding, data_sharding),
//            out_shardings=(data_sharding, data_sharding))
//   def p_train_step_jit(params, opt_state, x, y):
//       grads = jax.grad(loss_fn)(params, x, y)
//       grads = lax.pmean(grads, axis_name='data')
//       updates, opt_state = optimizer.update(grads, opt_state, params)
//       params = optax.apply_updates(params, updates)
//       return params, opt_state
//   x_sharded = jax.device_put(x_batch, data_sharding)  # and y
//
// jit-named-sharding is that code as written; jit-params-sharded gives the four arguments the
// shardings the text describes (params and opt_state "按照data_sharding", x and y device_put
// with it). Both run one step on the case's first global batch and return JAX's error.
#include <fmt/format.h>

#include "models/model.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "programs/program_parts.h"

namespace parity::engine_trainer {

std::optional<std::string> run_sharded_jit_program(const CaseSpec& spec,
                                                   const EngineProgram& program) {
  const pe::Mesh mesh(pe::DeviceSet(static_cast<int>(spec.parallel.replicas)),
                      {{"data", spec.parallel.replicas}});
  const pe::NamedSharding data_sharding(mesh, pe::PartitionSpec{{"data"}});

  const pe::TreeFunction grad_fn = pe::grad(case_loss(spec));
  const pe::optim::GradientTransformation optimizer = make_optimizer(spec.train);
  const pe::TreeFunction p_train_step = [grad_fn, optimizer](const std::vector<pe::Tree>& args) {
    const pe::Tree& params = args[0];
    const pe::Tree grads = pe::pmean(grad_fn({params, args[2], args[3]}), "data");
    auto [updates, opt_state] = optimizer.update(grads, args[1], params);
    return pe::Tree::tuple({pe::optim::apply_updates(params, updates), opt_state});
  };
  pe::JitOptions options;
  options.arg_names = {"params", "opt_state", "x", "y"};
  options.in_shardings = program.jit == JitShardings::kTwoForFourArguments
                             ? std::vector<pe::ShardingTree>(2, data_sharding)
                             : std::vector<pe::ShardingTree>(4, data_sharding);

  const GlobalBatch batch =
      global_samples(spec, program.name, spec.parallel.replicas * spec.data.per_replica_batch);
  const pe::Tree params = case_params(spec);
  return engine_error_of([&] {
    pe::jit(p_train_step, options,
            "p_train_step_jit")({params, optimizer.init(params), batch.x, batch.y});
  });
}

}  // namespace parity::engine_trainer
