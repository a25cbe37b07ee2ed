#include "runtime/sharding_propagation.h"

#include <algorithm>
#include <numeric>

#include "runtime/sharding_rules.h"

namespace pmap_engine::runtime {
namespace {

class Propagation {
 public:
  Propagation(const ir::Program& program, const Mesh& mesh,
              const std::vector<std::optional<ValueSharding>>& fixed)
      : program_(program), mesh_(mesh), known_(fixed) {
    known_.resize(program.vars.size());
    for (const ir::Equation& eq : program.equations) rules_.push_back(dim_rule(eq, program));
  }

  std::vector<ValueSharding> run() {
    // Broadcasts that add elements forward their operand's splits only once nothing else
    // changes, as Shardy's op-priority schedule propagates "any except broadcast forward"
    // before "any" (shardy/dialect/sdy/transforms/propagation/op_priority_propagation.cc).
    for (bool broadcasts : {false, true}) {
      broadcast_forward_ = broadcasts;
      bool changed = true;
      while (changed) {
        changed = false;
        for (size_t e = 0; e < program_.equations.size(); ++e) changed |= forward(e);
        for (size_t e = program_.equations.size(); e-- > 0;) changed |= backward(e);
      }
    }
    std::vector<ValueSharding> result;
    for (size_t v = 0; v < program_.vars.size(); ++v) {
      result.push_back(known_[v] ? *known_[v]
                                 : ValueSharding::replicated(program_.vars[v].shape.size()));
    }
    return result;
  }

 private:
  const Shape& shape(int var) const { return program_.vars[static_cast<size_t>(var)].shape; }
  bool is_split(int var) const {
    const auto& sharding = known_[static_cast<size_t>(var)];
    return sharding && !sharding->is_replicated();
  }
  // Records `proposal` for `var` if it is still free and the proposal splits something.
  bool propose(int var, const ValueSharding& proposal) {
    auto& slot = known_[static_cast<size_t>(var)];
    if (slot || proposal.is_replicated()) return false;
    slot = proposal;
    return true;
  }

  bool forward(size_t e) {
    const ir::Equation& eq = program_.equations[e];
    const auto& rule = rules_[e];
    if (!rule || (!rule->propagates_forward && !broadcast_forward_) ||
        known_[static_cast<size_t>(eq.outputs[0])]) {
      return false;
    }
    // Operands in order of how many blocks they are cut into, most first.
    std::vector<size_t> order(eq.inputs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return tiles(eq.inputs[a]) > tiles(eq.inputs[b]);
    });
    const Shape& out = shape(eq.outputs[0]);
    ValueSharding proposal = ValueSharding::replicated(out.size());
    for (size_t k : order) {
      if (!is_split(eq.inputs[k])) continue;
      const ValueSharding& operand = *known_[static_cast<size_t>(eq.inputs[k])];
      for (size_t i = 0; i < operand.dims.size(); ++i) {
        const int j = rule->to_output[k][i];
        const AxisList& axes = operand.dims[i];
        if (j < 0 || axes.empty() || !proposal.dims[static_cast<size_t>(j)].empty()) continue;
        if (std::any_of(axes.begin(), axes.end(),
                        [&](const std::string& axis) { return proposal.uses(axis); })) {
          continue;
        }
        if (!carries(axes_size(mesh_, axes), shape(eq.inputs[k])[i], out[static_cast<size_t>(j)])) {
          continue;
        }
        proposal.dims[static_cast<size_t>(j)] = axes;
      }
    }
    return propose(eq.outputs[0], proposal);
  }

  // An operand nobody has sharded takes the splits of the output dims its dims map to, and
  // those of the dims it is contracted with in the other operands (Shardy shares one factor
  // between the dims of a contraction, so its sharding reaches every operand: dot_general's
  // contracting dims, the batch dim a kernel's gradient sums over).
  bool backward(size_t e) {
    const ir::Equation& eq = program_.equations[e];
    const auto& rule = rules_[e];
    if (!rule) return false;
    const bool output_split = is_split(eq.outputs[0]);
    const Shape& out = shape(eq.outputs[0]);
    bool changed = false;
    for (size_t k = 0; k < eq.inputs.size(); ++k) {
      const Shape& in = shape(eq.inputs[k]);
      ValueSharding proposal = ValueSharding::replicated(in.size());
      for (size_t i = 0; i < in.size() && output_split; ++i) {
        const int j = rule->to_output[k][i];
        if (j < 0) continue;
        const AxisList& axes =
            known_[static_cast<size_t>(eq.outputs[0])]->dims[static_cast<size_t>(j)];
        if (!axes.empty() && carries(axes_size(mesh_, axes), out[static_cast<size_t>(j)], in[i])) {
          proposal.dims[i] = axes;
        }
      }
      for (size_t i = 0; i < in.size(); ++i) {
        if (rule->contracted[k][i] >= 0) proposal.dims[i] = partner_axes(eq, *rule, k, i, proposal);
      }
      changed |= propose(eq.inputs[k], proposal);
    }
    return changed;
  }

  // The split of a dim contracted with operand k's dim i in another, sharded operand, unless
  // `proposal` already uses one of its axes or the sizes do not divide.
  AxisList partner_axes(const ir::Equation& eq, const DimRule& rule, size_t k, size_t i,
                        const ValueSharding& proposal) const {
    const int group = rule.contracted[k][i];
    for (size_t other = 0; other < eq.inputs.size(); ++other) {
      if (other == k || !is_split(eq.inputs[other])) continue;
      const ValueSharding& sharding = *known_[static_cast<size_t>(eq.inputs[other])];
      for (size_t d = 0; d < rule.contracted[other].size(); ++d) {
        if (rule.contracted[other][d] != group || sharding.dims[d].empty()) continue;
        const AxisList& axes = sharding.dims[d];
        const bool reused = std::any_of(axes.begin(), axes.end(), [&](const std::string& axis) {
          return proposal.uses(axis);
        });
        if (!reused && shape(eq.inputs[k])[i] % axes_size(mesh_, axes) == 0) return axes;
      }
    }
    return {};
  }

  int64_t tiles(int var) const {
    const auto& sharding = known_[static_cast<size_t>(var)];
    return sharding ? sharding->tiles(mesh_) : 1;
  }

  const ir::Program& program_;
  const Mesh& mesh_;
  std::vector<std::optional<ValueSharding>> known_;  // the fixed ones from the start
  std::vector<std::optional<DimRule>> rules_;
  bool broadcast_forward_ = false;  // the last phase: see run()
};

}  // namespace

std::vector<ValueSharding> propagate_shardings(
    const ir::Program& program, const Mesh& mesh,
    const std::vector<std::optional<ValueSharding>>& fixed) {
  return Propagation(program, mesh, fixed).run();
}

}  // namespace pmap_engine::runtime
