#include "runtime/loop_fusion.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

namespace pmap_engine::runtime {
namespace {

// Elements per block: every member's scratch row of one block stays in L1/L2.
constexpr size_t kBlock = 512;
// The fusible primitives are unary or binary.
constexpr size_t kMaxArity = 2;

// How a fused loop reads one of its inputs, by the input's shape against the loop's.
enum class InputKind {
  kFull,      // the loop's shape
  kScalar,    // one element, broadcast
  kPeriodic,  // the loop's trailing dimensions, broadcast along the leading ones (a bias row)
};

InputKind input_kind(const Shape& input, const Shape& loop) {
  if (input == loop) return InputKind::kFull;
  if (shape_num_elements(input) == 1) return InputKind::kScalar;
  return InputKind::kPeriodic;
}

// [1, ..., 1, d_k, ..., d_n] against [D_1, ..., D_n] with d_i = D_i from k on.
bool is_periodic(const Shape& input, const Shape& loop) {
  if (input.size() != loop.size()) return false;
  size_t d = 0;
  while (d < input.size() && input[d] == 1) ++d;
  return std::equal(input.begin() + static_cast<std::ptrdiff_t>(d), input.end(),
                    loop.begin() + static_cast<std::ptrdiff_t>(d));
}

bool is_fusible(const ir::Program& program, const ir::Equation& equation) {
  if (equation.primitive->f32_block == nullptr || equation.outputs.size() != 1 ||
      equation.inputs.size() > kMaxArity) {
    return false;
  }
  const ir::AbstractValue& out = program.vars[static_cast<size_t>(equation.outputs[0])];
  if (out.dtype != DType::f32 || shape_num_elements(out.shape) <= 1) return false;
  for (int var : equation.inputs) {
    const ir::AbstractValue& in = program.vars[static_cast<size_t>(var)];
    if (in.dtype != DType::f32) return false;
    if (in.shape != out.shape && shape_num_elements(in.shape) != 1 &&
        !is_periodic(in.shape, out.shape)) {
      return false;
    }
  }
  return true;
}

// One group's loop: each step one member, reading the group's inputs or earlier steps' rows.
struct FusedLoop {
  Shape shape;
  std::vector<InputKind> input_kinds;  // per input of the fused equation
  struct Step {
    ir::F32Block block = nullptr;
    std::vector<int> operands;  // >= 0: an input of the fused equation; < 0: step -(k + 1)
  };
  std::vector<Step> steps;
  std::vector<size_t> output_steps;  // the step whose row each output receives
  std::vector<int> last_reader;      // per input: the last step reading it
};

// row[0 .. count) = the loop's elements begin .. begin + count of `input` repeated: element i
// of the loop reads input[i mod its size].
void fill_periodic(const Buffer& input, size_t begin, size_t count, float* row) {
  const float* values = input.data<float>();
  const size_t period = input.num_elements();
  size_t at = begin % period;
  for (size_t filled = 0; filled < count;) {
    const size_t run = std::min(count - filled, period - at);
    std::memcpy(row + filled, values + at, run * sizeof(float));
    filled += run;
    at = 0;
  }
}

// Output o's step may write straight into the output's storage unless that storage is an
// input's (taken in place) which a later step of the block still reads.
std::vector<bool> writes_directly(const FusedLoop& loop, const std::vector<const Buffer*>& in,
                                  const std::vector<Buffer>& outputs) {
  std::vector<bool> direct(outputs.size(), true);
  for (size_t o = 0; o < outputs.size(); ++o) {
    for (size_t r = 0; r < in.size(); ++r) {
      if (in[r]->bytes.get() == outputs[o].bytes.get() &&
          loop.last_reader[r] > static_cast<int>(loop.output_steps[o])) {
        direct[o] = false;
      }
    }
  }
  return direct;
}

std::vector<Buffer> run_fused_loop(const FusedLoop& loop, const std::vector<const Buffer*>& in) {
  const size_t num_elements = shape_num_elements(loop.shape);
  std::vector<Buffer> outputs;
  for (size_t o = 0; o < loop.output_steps.size(); ++o) {
    // Written in full. It may take the storage of an input that dies here (the primitive is
    // element-wise): a block of it is written only where that block of the input is no longer
    // read (writes_directly), else stored after the block's last step.
    outputs.push_back(Buffer::allocate_uninitialized(DType::f32, loop.shape));
  }
  const std::vector<bool> direct = writes_directly(loop, in, outputs);
  std::vector<int> output_of_step(loop.steps.size(), -1);
  for (size_t o = 0; o < outputs.size(); ++o) {
    output_of_step[loop.output_steps[o]] = static_cast<int>(o);
  }
  // Scratch rows (every element written before it is read): one per step, and one per
  // periodic input for that input's values over the block.
  const std::unique_ptr<float[]> rows(new float[loop.steps.size() * kBlock]);
  const std::unique_ptr<float[]> periodic_rows(new float[in.size() * kBlock]);
  std::vector<float*> step_rows(loop.steps.size());
  std::array<const float*, kMaxArity> operands{};
  std::array<bool, kMaxArity> scalar{};
  for (size_t begin = 0; begin < num_elements; begin += kBlock) {
    const size_t count = std::min(kBlock, num_elements - begin);
    for (size_t r = 0; r < in.size(); ++r) {
      if (loop.input_kinds[r] == InputKind::kPeriodic) {
        fill_periodic(*in[r], begin, count, periodic_rows.get() + r * kBlock);
      }
    }
    for (size_t s = 0; s < loop.steps.size(); ++s) {
      const int o = output_of_step[s];
      step_rows[s] = o >= 0 && direct[static_cast<size_t>(o)]
                         ? outputs[static_cast<size_t>(o)].data<float>() + begin
                         : rows.get() + s * kBlock;
    }
    for (size_t s = 0; s < loop.steps.size(); ++s) {
      const FusedLoop::Step& step = loop.steps[s];
      for (size_t k = 0; k < step.operands.size(); ++k) {
        const int ref = step.operands[k];
        if (ref >= 0) {
          const auto r = static_cast<size_t>(ref);
          const InputKind kind = loop.input_kinds[r];
          scalar[k] = kind == InputKind::kScalar;
          operands[k] = kind == InputKind::kPeriodic ? periodic_rows.get() + r * kBlock
                        : scalar[k]                  ? in[r]->data<float>()
                                                     : in[r]->data<float>() + begin;
        } else {
          scalar[k] = false;
          operands[k] = step_rows[static_cast<size_t>(-ref - 1)];
        }
      }
      step.block(operands.data(), scalar.data(), step_rows[s], count);
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (direct[o]) continue;
      std::memcpy(outputs[o].data<float>() + begin, step_rows[loop.output_steps[o]],
                  count * sizeof(float));
    }
  }
  return outputs;
}

// Which equations form each group (ir/program.h indices, in program order).
class Grouping {
 public:
  explicit Grouping(const ir::Program& program)
      : program_(program),
        group_of_(program.equations.size(), -1),
        producer_(program.vars.size(), -1),
        readers_(program.vars.size()),
        is_output_(program.vars.size(), false) {
    for (int var : program.outputs) is_output_[static_cast<size_t>(var)] = true;
    for (size_t e = 0; e < program.equations.size(); ++e) {
      for (int var : program.equations[e].inputs) readers_[static_cast<size_t>(var)].push_back(e);
      for (int var : program.equations[e].outputs) {
        producer_[static_cast<size_t>(var)] = static_cast<int>(e);
      }
    }
    for (size_t e = 0; e < program.equations.size(); ++e) {
      if (is_fusible(program, program.equations[e])) add(e);
    }
  }

  // The groups of two or more members.
  std::vector<std::vector<size_t>> fused_groups() const {
    std::vector<std::vector<size_t>> out;
    for (const auto& members : groups_) {
      if (members.size() > 1) out.push_back(members);
    }
    return out;
  }

  // Whether a member's value leaves its group: a program output, or read by an equation of
  // another group or of none.
  bool escapes(int var) const {
    const auto v = static_cast<size_t>(var);
    if (is_output_[v]) return true;
    const int group = group_of_[static_cast<size_t>(producer_[v])];
    for (size_t reader : readers_[v]) {
      if (group_of_[reader] != group) return true;
    }
    return false;
  }

 private:
  const Shape& output_shape(size_t e) const {
    return program_.vars[static_cast<size_t>(program_.equations[e].outputs[0])].shape;
  }

  // Equation e joins the groups of its producers (of its shape) that admit it.
  void add(size_t e) {
    std::set<int> joined;
    for (int var : program_.equations[e].inputs) {
      const int p = producer_[static_cast<size_t>(var)];
      if (p < 0) continue;
      const int g = group_of_[static_cast<size_t>(p)];
      if (g >= 0 && output_shape(static_cast<size_t>(p)) == output_shape(e)) joined.insert(g);
    }
    bool dropped = true;
    while (dropped) {
      dropped = false;
      for (int g : joined) {
        if (!admits(g, joined, e)) {
          joined.erase(g);
          dropped = true;
          break;
        }
      }
    }
    std::vector<size_t> members;
    for (int g : joined) {
      auto& old = groups_[static_cast<size_t>(g)];
      members.insert(members.end(), old.begin(), old.end());
      old.clear();
    }
    members.push_back(e);
    std::sort(members.begin(), members.end());
    const int id = static_cast<int>(groups_.size());
    for (size_t m : members) group_of_[m] = id;
    groups_.push_back(std::move(members));
  }

  // Group g may move to position e: no equation outside the groups joining (and not e itself)
  // reads one of g's values before e.
  bool admits(int g, const std::set<int>& joined, size_t e) const {
    for (size_t m : groups_[static_cast<size_t>(g)]) {
      for (int var : program_.equations[m].outputs) {
        for (size_t reader : readers_[static_cast<size_t>(var)]) {
          if (reader == e || joined.count(group_of_[reader])) continue;
          if (reader < e) return false;
        }
      }
    }
    return true;
  }

  const ir::Program& program_;
  std::vector<int> group_of_;
  std::vector<int> producer_;
  std::vector<std::vector<size_t>> readers_;
  std::vector<bool> is_output_;
  std::vector<std::vector<size_t>> groups_;
};

// The equation that runs `members` as one loop, with its primitive.
ir::Equation fused_equation(const ir::Program& program, const Grouping& grouping,
                            const std::vector<size_t>& members,
                            std::vector<std::unique_ptr<ir::Primitive>>& fusions) {
  auto loop = std::make_shared<FusedLoop>();
  ir::Equation fused;
  std::vector<int> step_of(program.vars.size(), -1);  // var -> the step computing it
  std::string ops;
  for (size_t m : members) {
    const ir::Equation& member = program.equations[m];
    FusedLoop::Step step;
    step.block = member.primitive->f32_block;
    for (int var : member.inputs) {
      const auto v = static_cast<size_t>(var);
      if (step_of[v] >= 0) {
        step.operands.push_back(-(step_of[v] + 1));
        continue;
      }
      auto known = std::find(fused.inputs.begin(), fused.inputs.end(), var);
      if (known == fused.inputs.end()) {
        fused.inputs.push_back(var);
        loop->input_kinds.push_back(input_kind(
            program.vars[v].shape, program.vars[static_cast<size_t>(member.outputs[0])].shape));
        loop->last_reader.push_back(-1);
        known = fused.inputs.end() - 1;
      }
      const auto r = static_cast<size_t>(known - fused.inputs.begin());
      step.operands.push_back(static_cast<int>(r));
      loop->last_reader[r] = static_cast<int>(loop->steps.size());
    }
    const int out = member.outputs[0];
    step_of[static_cast<size_t>(out)] = static_cast<int>(loop->steps.size());
    if (grouping.escapes(out)) {
      fused.outputs.push_back(out);
      loop->output_steps.push_back(loop->steps.size());
    }
    loop->steps.push_back(std::move(step));
    ops += (ops.empty() ? "" : ",") + member.primitive->name;
  }
  const int last_value = program.equations[members.back()].outputs[0];
  loop->shape = program.vars[static_cast<size_t>(last_value)].shape;

  auto primitive = std::make_unique<ir::Primitive>();
  primitive->name = "fusion";
  primitive->abstract_eval = [](const std::vector<ir::AbstractValue>&, const ir::Params&)
      -> std::vector<ir::AbstractValue> {
    throw std::logic_error("a fusion is made from a traced program; it is never traced itself");
  };
  primitive->kernel = [loop](const std::vector<const Buffer*>& in, const ir::Params&) {
    return run_fused_loop(*loop, in);
  };
  primitive->elementwise = true;
  fused.primitive = primitive.get();
  fused.params = ir::Params{{"kind", std::string("kLoop")}, {"calls", ops}};
  fusions.push_back(std::move(primitive));
  return fused;
}

}  // namespace

void fuse_elementwise_loops(Executable& executable) {
  const ir::Program& program = executable.program;
  const Grouping grouping(program);
  const std::vector<std::vector<size_t>> groups = grouping.fused_groups();
  if (groups.empty()) return;
  // Each group runs at its last member's place; its other members are dropped.
  std::vector<int> runs_group(program.equations.size(), -1);
  std::vector<bool> dropped(program.equations.size(), false);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t m : groups[g]) dropped[m] = true;
    runs_group[groups[g].back()] = static_cast<int>(g);
    executable.fused_equations += static_cast<int64_t>(groups[g].size());
  }
  std::vector<ir::Equation> equations;
  for (size_t e = 0; e < program.equations.size(); ++e) {
    if (runs_group[e] >= 0) {
      equations.push_back(fused_equation(
          program, grouping, groups[static_cast<size_t>(runs_group[e])], executable.fusions));
    } else if (!dropped[e]) {
      equations.push_back(program.equations[e]);
    }
  }
  executable.program.equations = std::move(equations);
}

}  // namespace pmap_engine::runtime
