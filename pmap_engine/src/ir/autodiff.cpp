// value_and_grad: reverse mode as a transformation of the traced program.
//
// Vocabulary:
//   primal program  f traced once with tracer arguments (an inner trace).
//   replay          the primal program's equations applied again to the real arguments, in
//                   the enclosing trace (or op by op when there is none), keeping every
//                   intermediate value: the forward pass.
//   tangent-needing a variable that depends on a differentiated argument through float
//                   values; only equations with such inputs get a backward rule.
//   cotangent       d loss / d variable, accumulated by summing contributions; the loss's own
//                   cotangent is 1.
// The backward pass walks the equations in reverse and applies each primitive's VJP rule,
// written with the public ops, so it is recorded into the enclosing trace like user code: the
// printed program of a train step shows forward, backward and update.
//
// Under shard_map(check_vma=True) the primal program's values carry the mesh axes they vary
// along (ir/varying_axes.h): the inner trace's arguments get their types from the enclosing
// trace, the seed cotangent (ones_like) has the loss's type, and the implicit pvary and
// psum_invariant equations of the primal program transpose to each other (ops/collectives.cpp).
// So a replicated argument's gradient is the sum over devices of its uses' cotangents, and a
// psum'd loss's cotangent reaches each device unsummed, as in JAX.
#include <map>

#include "ir/trace.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

struct TracedFunction {
  ir::Program program;
  std::vector<Array> captured;
  Tree output;  // structure of f's result (leaves are tracers; only the structure is used)
};

TracedFunction trace_function(const TreeFunction& function, const std::vector<Tree>& args) {
  TracedFunction traced;
  ir::TraceContext trace;
  std::vector<Tree> tracer_args;
  for (const auto& arg : args) {
    std::vector<Array> tracers;
    for (const auto& leaf : arg.leaves())
      tracers.push_back(
          trace.new_input(leaf.dtype(), leaf.shape(), ir::TraceContext::varying_of(leaf)));
    tracer_args.push_back(arg.unflatten(tracers));
  }
  traced.output = function(tracer_args);
  traced.program = trace.finish(traced.output.leaves(), &traced.captured);
  return traced;
}

void check_differentiable(const std::vector<Tree>& args, const std::vector<size_t>& argnums) {
  for (size_t argnum : argnums) {
    if (argnum >= args.size()) {
      throw EngineError("value_and_grad: argnums contains " + std::to_string(argnum) +
                        " but the function was called with " + std::to_string(args.size()) +
                        " arguments");
    }
    std::vector<Array> leaves = args[argnum].leaves();
    std::vector<std::string> paths = args[argnum].leaf_paths();
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!is_floating(leaves[i].dtype())) {
        throw EngineError(
            "grad requires real-valued inputs (a floating dtype), but argument " +
            std::to_string(argnum) + (paths[i].empty() ? "" : " at " + paths[i]) + " is " +
            type_to_string(leaves[i].dtype(), leaves[i].shape()) +
            ". Differentiate only with respect to float arguments (argnums), as in JAX.");
      }
    }
  }
}

const Array& loss_of(const Tree& output, bool has_aux) {
  const Tree& loss = has_aux ? output[0] : output;
  const Array& value = loss.leaf();
  if (!value.shape().empty() || !is_floating(value.dtype())) {
    throw EngineError(
        "Gradient only defined for scalar-output functions with a float output. "
        "Output was " +
        type_to_string(value.dtype(), value.shape()) +
        (value.shape().empty() ? "" : "; reduce it (e.g. mean) to a scalar"));
  }
  return value;
}

}  // namespace

TreeFunction value_and_grad(TreeFunction function, std::vector<size_t> argnums, bool has_aux) {
  return [function, argnums, has_aux](const std::vector<Tree>& args) -> Tree {
    check_differentiable(args, argnums);
    TracedFunction traced = trace_function(function, args);
    loss_of(traced.output, has_aux);
    const ir::Program& program = traced.program;

    // Forward replay, keeping every value.
    std::map<int, Array> values;
    std::map<int, bool> needs_cotangent;
    size_t input_index = 0;
    for (size_t a = 0; a < args.size(); ++a) {
      const bool differentiated = std::find(argnums.begin(), argnums.end(), a) != argnums.end();
      for (const auto& leaf : args[a].leaves()) {
        int var = program.inputs[input_index++];
        values[var] = leaf;
        needs_cotangent[var] = differentiated;
      }
    }
    for (size_t i = 0; i < program.captured.size(); ++i) {
      values[program.captured[i]] = traced.captured[i];
    }
    for (size_t i = 0; i < program.constants.size(); ++i) {
      values[program.constants[i]] = Array(program.constant_values[i]);
    }
    for (const auto& equation : program.equations) {
      std::vector<Array> inputs;
      bool depends = false;
      for (int var : equation.inputs) {
        inputs.push_back(values.at(var));
        depends = depends || needs_cotangent[var];
      }
      std::vector<Array> outputs = ir::bind(*equation.primitive, inputs, equation.params);
      for (size_t o = 0; o < outputs.size(); ++o) {
        values[equation.outputs[o]] = outputs[o];
        // A primitive without a VJP (stop_gradient, integer ops) ends the dependence.
        needs_cotangent[equation.outputs[o]] =
            depends && is_floating(outputs[o].dtype()) && equation.primitive->vjp != nullptr;
      }
    }

    // Backward: cotangents from the loss back to the arguments.
    const int loss_var = program.outputs[0];
    std::map<int, Array> cotangents;
    cotangents[loss_var] = ones_like(values.at(loss_var));
    for (auto it = program.equations.rbegin(); it != program.equations.rend(); ++it) {
      const ir::Equation& equation = *it;
      if (!equation.primitive->vjp) continue;
      bool any_output = false;
      std::vector<Array> output_cotangents;
      std::vector<Array> outputs;
      for (int var : equation.outputs) {
        auto found = cotangents.find(var);
        any_output = any_output || found != cotangents.end();
        output_cotangents.push_back(found != cotangents.end() ? found->second : Array());
        outputs.push_back(values.at(var));
      }
      bool any_input = false;
      std::vector<Array> inputs;
      std::vector<bool> wanted;
      for (int var : equation.inputs) {
        any_input = any_input || needs_cotangent[var];
        inputs.push_back(values.at(var));
        wanted.push_back(needs_cotangent[var]);
      }
      if (!any_output || !any_input) continue;
      std::vector<Array> input_cotangents = equation.primitive->vjp(
          {inputs, outputs, equation.params, output_cotangents, std::move(wanted)});
      for (size_t i = 0; i < equation.inputs.size(); ++i) {
        const int var = equation.inputs[i];
        if (!needs_cotangent[var] || i >= input_cotangents.size() || !input_cotangents[i].valid()) {
          continue;
        }
        auto found = cotangents.find(var);
        if (found == cotangents.end()) {
          cotangents[var] = input_cotangents[i];
        } else {
          found->second = add(found->second, input_cotangents[i]);
        }
      }
    }

    // Results: the primal outputs and one gradient tree per differentiated argument.
    std::vector<Array> output_values;
    for (int var : program.outputs) output_values.push_back(values.at(var));
    Tree value = traced.output.unflatten(output_values);
    std::vector<Tree> grads;
    input_index = 0;
    for (size_t a = 0; a < args.size(); ++a) {
      const std::vector<Array> leaves = args[a].leaves();
      if (std::find(argnums.begin(), argnums.end(), a) == argnums.end()) {
        input_index += leaves.size();
        continue;
      }
      std::vector<Array> arg_grads;
      for (const auto& leaf : leaves) {
        auto found = cotangents.find(program.inputs[input_index++]);
        arg_grads.push_back(found != cotangents.end() ? found->second : zeros_like(leaf));
      }
      grads.push_back(args[a].unflatten(arg_grads));
    }
    // Gradients in argnums order.
    std::vector<Tree> ordered;
    for (size_t argnum : argnums) {
      size_t position = 0;
      for (size_t a = 0; a < argnum; ++a) {
        if (std::find(argnums.begin(), argnums.end(), a) != argnums.end()) ++position;
      }
      ordered.push_back(grads[position]);
    }
    Tree grad_tree = ordered.size() == 1 ? ordered.front() : Tree::tuple(ordered);
    return Tree::tuple({value, grad_tree});
  };
}

TreeFunction grad(TreeFunction function, std::vector<size_t> argnums, bool has_aux) {
  TreeFunction both = value_and_grad(std::move(function), std::move(argnums), has_aux);
  return [both, has_aux](const std::vector<Tree>& args) -> Tree {
    Tree result = both(args);
    return has_aux ? Tree::tuple({result[1], result[0][1]}) : result[1];
  };
}

}  // namespace pmap_engine
