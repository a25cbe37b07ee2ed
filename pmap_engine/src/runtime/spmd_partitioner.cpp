#include "runtime/spmd_partitioner.h"

#include <map>
#include <optional>
#include <stdexcept>

#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "runtime/sharding_rules.h"

namespace pmap_engine::runtime {
namespace {

// One variable's block on this device and the layout it is in.
struct Block {
  Array value;
  ValueSharding sharding;
};

// Device p's part of dim d of `x` split over `axis`: dynamic_slice at axis_index * block.
Array cut(const Array& x, size_t d, const std::string& axis) {
  const int64_t parts = axis_size(axis);
  Shape sizes = x.shape();
  sizes[d] /= parts;
  std::vector<Array> starts(sizes.size(), full({}, 0, DType::i32));
  starts[d] = mul(axis_index(axis), full({}, static_cast<double>(sizes[d]), DType::i32));
  return dynamic_slice(x, starts, sizes);
}

// `x`, laid out as `from`, laid out as `to`: per dim, the axes after the common prefix are
// gathered (innermost first, so that blocks concatenate in their mesh order), then the axes
// `to` adds are cut (outermost first).
Array reshard(Array x, const ValueSharding& from, const ValueSharding& to) {
  if (from == to) return x;
  std::vector<size_t> common(from.dims.size(), 0);
  for (size_t d = 0; d < from.dims.size(); ++d) {
    const AxisList& a = from.dims[d];
    const AxisList& b = to.dims[d];
    while (common[d] < a.size() && common[d] < b.size() && a[common[d]] == b[common[d]]) {
      ++common[d];
    }
    for (size_t k = a.size(); k-- > common[d];) {
      x = all_gather(x, a[k], static_cast<int64_t>(d), /*tiled=*/true);
    }
  }
  for (size_t d = 0; d < to.dims.size(); ++d) {
    for (size_t k = common[d]; k < to.dims[d].size(); ++k) x = cut(x, d, to.dims[d][k]);
  }
  return x;
}

// The equations some output depends on, or with an effect. XLA removes the others (HloDCE), so
// a value nothing reads, such as the loss under grad alone, costs no collective.
std::vector<bool> live_equations(const ir::Program& program) {
  std::vector<bool> needed(program.vars.size(), false);
  for (int var : program.outputs) needed[static_cast<size_t>(var)] = true;
  std::vector<bool> live(program.equations.size(), false);
  for (size_t e = program.equations.size(); e-- > 0;) {
    const ir::Equation& eq = program.equations[e];
    live[e] = eq.primitive->name == "debug_print";  // an effect, kept as JAX keeps callbacks
    for (int var : eq.outputs) live[e] = live[e] || needed[static_cast<size_t>(var)];
    if (!live[e]) continue;
    for (int var : eq.inputs) needed[static_cast<size_t>(var)] = true;
  }
  return live;
}

class DeviceProgram {
 public:
  explicit DeviceProgram(const ShardedProgram& sharded)
      : sharded_(sharded), program_(sharded.program), values_(program_.vars.size()),
        live_(live_equations(sharded.program)) {}

  Tree operator()(const std::vector<Tree>& args) {
    if (!program_.captured.empty()) {
      throw std::logic_error("a partitioned jit program closes over outer tracers");
    }
    size_t input = 0;
    for (size_t a = 0; a < args.size(); ++a) {
      if (sharded_.static_argnums.count(a)) continue;
      for (const Array& leaf : args[a].leaves()) {
        const int var = program_.inputs.at(input++);
        values_[static_cast<size_t>(var)] = Block{leaf, sharded_.shardings[static_cast<size_t>(var)]};
      }
    }
    for (size_t c = 0; c < program_.constants.size(); ++c) {
      const Array value(program_.constant_values[c]);
      values_[static_cast<size_t>(program_.constants[c])] =
          Block{value, ValueSharding::replicated(value.shape().size())};
    }
    for (size_t e = 0; e < program_.equations.size(); ++e) {
      if (live_[e]) run(program_.equations[e]);
    }
    std::vector<Array> outputs;
    for (size_t o = 0; o < program_.outputs.size(); ++o) {
      const Block& block = value(program_.outputs[o]);
      outputs.push_back(reshard(block.value, block.sharding, sharded_.output_shardings[o]));
    }
    return sharded_.output.unflatten(outputs);
  }

 private:
  const Block& value(int var) const { return *values_.at(static_cast<size_t>(var)); }
  const Shape& shape(int var) const { return program_.vars[static_cast<size_t>(var)].shape; }
  const ValueSharding& target(int var) const {
    return sharded_.shardings[static_cast<size_t>(var)];
  }
  void define(int var, const Array& local, const ValueSharding& layout) {
    values_[static_cast<size_t>(var)] = Block{reshard(local, layout, target(var)), target(var)};
  }

  void run(const ir::Equation& eq) {
    if (eq.primitive->name == "sharding_constraint") {
      const Block& in = value(eq.inputs[0]);
      define(eq.outputs[0], in.value, in.sharding);
      return;
    }
    if (const std::optional<DimRule> rule = dim_rule(eq, program_)) {
      run_with_rule(eq, *rule);
    } else {
      run_whole(eq);
    }
  }

  // No rule: every operand gathered whole, the results cut to their shardings.
  void run_whole(const ir::Equation& eq) {
    std::vector<Array> inputs;
    for (int var : eq.inputs) {
      const Block& in = value(var);
      inputs.push_back(
          reshard(in.value, in.sharding, ValueSharding::replicated(in.sharding.dims.size())));
    }
    const std::vector<Array> outputs = ir::bind(*eq.primitive, inputs, eq.params);
    for (size_t o = 0; o < outputs.size(); ++o) {
      define(eq.outputs[o], outputs[o], ValueSharding::replicated(outputs[o].shape().size()));
    }
  }

  // The contraction groups whose dims all carry the same axes: they stay split, and their
  // axes are the ones the result is a partial sum over.
  std::map<int, AxisList> split_contractions(const ir::Equation& eq, const DimRule& rule) const {
    std::map<int, std::optional<AxisList>> seen;
    std::map<int, bool> agree;
    for (size_t k = 0; k < eq.inputs.size(); ++k) {
      const ValueSharding& layout = value(eq.inputs[k]).sharding;
      for (size_t i = 0; i < rule.contracted[k].size(); ++i) {
        const int group = rule.contracted[k][i];
        if (group < 0) continue;
        auto& axes = seen[group];
        if (!axes) {
          axes = layout.dims[i];
          agree[group] = true;
        } else if (*axes != layout.dims[i]) {
          agree[group] = false;
        }
      }
    }
    std::map<int, AxisList> split;
    for (const auto& [group, axes] : seen) {
      if (agree[group] && !axes->empty()) split[group] = *axes;
    }
    return split;
  }

  void run_with_rule(const ir::Equation& eq, const DimRule& rule) {
    const int out = eq.outputs[0];
    const Shape& out_shape = shape(out);
    const ValueSharding& wanted = target(out);
    const std::map<int, AxisList> contractions = split_contractions(eq, rule);
    AxisList partial;
    for (const auto& [group, axes] : contractions) partial.insert(partial.end(), axes.begin(), axes.end());

    // The layout the equation computes its result in: the wanted one, less the partial axes,
    // on the dims every operand that maps there can carry (any dim when a shape param lets
    // each device state its block's shape).
    ValueSharding layout = ValueSharding::replicated(out_shape.size());
    for (size_t j = 0; j < out_shape.size(); ++j) {
      const AxisList axes = without(wanted.dims[j], partial);
      bool mapped = rule.shape_param != nullptr;
      bool fits = true;
      for (size_t k = 0; k < eq.inputs.size(); ++k) {
        for (size_t i = 0; i < rule.to_output[k].size(); ++i) {
          if (rule.to_output[k][i] != static_cast<int>(j)) continue;
          mapped = true;
          fits = fits && carries(axes_size(sharded_.mesh, axes), shape(eq.inputs[k])[i], out_shape[j]);
        }
      }
      if (mapped && fits) layout.dims[j] = axes;
    }

    std::vector<Array> inputs;
    for (size_t k = 0; k < eq.inputs.size(); ++k) {
      const Block& in = value(eq.inputs[k]);
      ValueSharding needed = ValueSharding::replicated(in.sharding.dims.size());
      for (size_t i = 0; i < needed.dims.size(); ++i) {
        const int j = rule.to_output[k][i];
        const int group = rule.contracted[k][i];
        if (j >= 0) {
          needed.dims[i] = layout.dims[static_cast<size_t>(j)];
        } else if (group >= 0 && contractions.count(group)) {
          needed.dims[i] = contractions.at(group);
        }
      }
      inputs.push_back(reshard(in.value, in.sharding, needed));
    }
    ir::Params params = eq.params;
    if (rule.shape_param) params.set(rule.shape_param, local_shape(out_shape, layout, sharded_.mesh));
    Array result = ir::bind1(*eq.primitive, inputs, params);
    define(out, complete(result, partial, rule.combine, wanted, layout), layout);
  }

  // Completes a partial result: reduce-scatter along a dim the wanted layout splits over the
  // axis next (its block order), all-reduce over the rest. Updates `layout`.
  static Array complete(Array result, const AxisList& partial, Combine combine,
                        const ValueSharding& wanted, ValueSharding& layout) {
    for (const std::string& axis : partial) {
      bool scattered = false;
      for (size_t j = 0; j < wanted.dims.size() && combine == Combine::kSum && !scattered; ++j) {
        const AxisList& goal = wanted.dims[j];
        AxisList& have = layout.dims[j];
        if (have.size() < goal.size() && goal[have.size()] == axis &&
            std::equal(have.begin(), have.end(), goal.begin())) {
          result = psum_scatter(result, axis, static_cast<int64_t>(j), /*tiled=*/true);
          have.push_back(axis);
          scattered = true;
        }
      }
      if (!scattered) result = combine == Combine::kSum ? psum(result, axis) : pmax(result, axis);
    }
    return result;
  }

  const ShardedProgram& sharded_;
  const ir::Program& program_;
  std::vector<std::optional<Block>> values_;
  std::vector<bool> live_;  // per equation
};

}  // namespace

TreeFunction partitioned_function(std::shared_ptr<const ShardedProgram> program) {
  return [program](const std::vector<Tree>& args) { return DeviceProgram(*program)(args); };
}

}  // namespace pmap_engine::runtime
