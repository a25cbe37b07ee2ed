#include "runtime/loop_fusion.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "ops/broadcast_read.h"
#include "ops/kernel_util.h"

namespace pmap_engine::runtime {
namespace {

// Elements per block: every member's scratch row of one block stays in L1/L2.
constexpr size_t kBlock = 512;
// The fusible primitives take at most three operands (select_n: a predicate and two cases).
constexpr size_t kMaxArity = 3;

bool is_broadcast(const ir::Equation& equation) {
  return equation.primitive->name == "broadcast_in_dim";
}

// The dtypes a fused loop carries: f32, and preds (bool) held as 0 or 1 in f32.
bool is_loop_dtype(DType dtype) { return dtype == DType::f32 || dtype == DType::bool_; }

// lax's broadcasting_shape_rule for an operand of an element-wise primitive: 0-d, or the
// output's rank with each dimension equal to the output's or 1.
bool broadcasts_to(const Shape& input, const Shape& output) {
  if (input.empty()) return true;
  if (input.size() != output.size()) return false;
  for (size_t d = 0; d < input.size(); ++d) {
    if (input[d] != output[d] && input[d] != 1) return false;
  }
  return true;
}

bool is_fusible(const ir::Program& program, const ir::Equation& equation) {
  if (equation.outputs.size() != 1) return false;
  const ir::AbstractValue& out = program.vars[static_cast<size_t>(equation.outputs[0])];
  if (!is_loop_dtype(out.dtype) || shape_num_elements(out.shape) <= 1) return false;
  if (is_broadcast(equation)) {
    return is_loop_dtype(program.vars[static_cast<size_t>(equation.inputs[0])].dtype);
  }
  const ir::Primitive& primitive = *equation.primitive;
  if (primitive.f32_block == nullptr || equation.inputs.size() > kMaxArity ||
      (primitive.f32_block_arity != 0 && equation.inputs.size() != primitive.f32_block_arity)) {
    return false;
  }
  for (int var : equation.inputs) {
    const ir::AbstractValue& in = program.vars[static_cast<size_t>(var)];
    if (!is_loop_dtype(in.dtype) || !broadcasts_to(in.shape, out.shape)) return false;
  }
  return true;
}

// How a fused loop reads one of its inputs.
enum class Read {
  kFull,      // f32 of the loop's shape, element for element
  kScalar,    // f32, one element for all
  kGathered,  // into a row per block through a BroadcastRead: a broadcast (stride 0 along the
              // broadcast dimensions), or a pred converted to 0 or 1 in f32
};

struct LoopInput {
  Read read = Read::kFull;
  DType dtype = DType::f32;
  BroadcastRead view;
};

// One group's loop: each step one member, reading the group's inputs or earlier steps' rows.
struct FusedLoop {
  Shape shape;
  std::vector<LoopInput> inputs;  // per input of the fused equation
  struct Step {
    ir::F32Block block = nullptr;
    std::vector<int> operands;  // >= 0: an input of the fused equation; < 0: step -(k + 1)
  };
  std::vector<Step> steps;
  std::vector<size_t> output_steps;  // the step whose row each output receives
  std::vector<DType> output_dtypes;
  std::vector<int> last_reader;  // per input: the last step reading it
};

// The executor may hand an output the storage of an input that dies here (the fusion is
// element-wise). That is safe for an input read element for element, each block before it is
// written (writes_directly); an input read otherwise (a broadcast, read again by later blocks)
// must not be overwritten, so an output that took one gets storage of its own.
void keep_apart_from_reread_inputs(const FusedLoop& loop, const std::vector<const Buffer*>& in,
                                   std::vector<Buffer>& outputs) {
  for (Buffer& output : outputs) {
    for (size_t r = 0; r < in.size(); ++r) {
      if (loop.inputs[r].read != Read::kFull && in[r]->bytes.get() == output.bytes.get()) {
        output = Buffer::allocate_uninitialized(output.dtype, output.shape);
      }
    }
  }
}

// An f32 output's step may write straight into the output's storage unless that storage is an
// input's (taken in place) which a later step of the block still reads.
std::vector<bool> writes_directly(const FusedLoop& loop, const std::vector<const Buffer*>& in,
                                  const std::vector<Buffer>& outputs) {
  std::vector<bool> direct(outputs.size(), true);
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (outputs[o].dtype != DType::f32) direct[o] = false;
    for (size_t r = 0; r < in.size(); ++r) {
      if (in[r]->bytes.get() == outputs[o].bytes.get() &&
          loop.last_reader[r] > static_cast<int>(loop.output_steps[o])) {
        direct[o] = false;
      }
    }
  }
  return direct;
}

float pred_as_f32(uint8_t value) { return value != 0 ? 1.0f : 0.0f; }

// row[0 .. count) = elements begin .. begin + count of a gathered input.
void gather(const LoopInput& input, const Buffer& buffer, size_t begin, size_t count,
            float* row) {
  if (input.dtype == DType::bool_) {
    input.view.read(buffer.data<uint8_t>(), begin, count, row, pred_as_f32);
  } else {
    input.view.read(buffer.data<float>(), begin, count, row, [](float x) { return x; });
  }
}

// Stores a block's row into an output that the step did not write directly.
void store(const float* row, size_t begin, size_t count, Buffer& output) {
  if (output.dtype == DType::bool_) {
    uint8_t* out = output.data<uint8_t>() + begin;
    for (size_t i = 0; i < count; ++i) out[i] = row[i] != 0.0f;
  } else {
    std::memcpy(output.data<float>() + begin, row, count * sizeof(float));
  }
}

std::vector<Buffer> run_fused_loop(const FusedLoop& loop, const std::vector<const Buffer*>& in) {
  const size_t num_elements = shape_num_elements(loop.shape);
  std::vector<Buffer> outputs;
  for (DType dtype : loop.output_dtypes) {
    // Written in full; see keep_apart_from_reread_inputs and writes_directly for the storage
    // of an input that dies here.
    outputs.push_back(Buffer::allocate_uninitialized(dtype, loop.shape));
  }
  keep_apart_from_reread_inputs(loop, in, outputs);
  const std::vector<bool> direct = writes_directly(loop, in, outputs);
  std::vector<int> output_of_step(loop.steps.size(), -1);
  for (size_t o = 0; o < outputs.size(); ++o) {
    output_of_step[loop.output_steps[o]] = static_cast<int>(o);
  }
  // Scratch rows (every element written before it is read): one per step, and one per
  // gathered input for that input's values over the block.
  const std::unique_ptr<float[]> rows(new float[loop.steps.size() * kBlock]);
  const std::unique_ptr<float[]> gathered_rows(new float[in.size() * kBlock]);
  std::vector<float*> step_rows(loop.steps.size());
  std::array<const float*, kMaxArity> operands{};
  std::array<bool, kMaxArity> scalar{};
  for (size_t begin = 0; begin < num_elements; begin += kBlock) {
    const size_t count = std::min(kBlock, num_elements - begin);
    for (size_t r = 0; r < in.size(); ++r) {
      if (loop.inputs[r].read == Read::kGathered) {
        gather(loop.inputs[r], *in[r], begin, count, gathered_rows.get() + r * kBlock);
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
          const Read read = loop.inputs[r].read;
          scalar[k] = read == Read::kScalar;
          operands[k] = read == Read::kGathered ? gathered_rows.get() + r * kBlock
                        : scalar[k]             ? in[r]->data<float>()
                                                : in[r]->data<float>() + begin;
        } else {
          scalar[k] = false;
          operands[k] = step_rows[static_cast<size_t>(-ref - 1)];
        }
      }
      step.block(operands.data(), scalar.data(), step_rows[s], count);
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (!direct[o]) store(step_rows[loop.output_steps[o]], begin, count, outputs[o]);
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
    materialise_escaping_broadcasts();
  }

  // The groups worth a loop: two or more members, or one that reads a broadcast operand (the
  // loop reads it as a view, where the op's own kernel would walk strides element by element).
  std::vector<std::vector<size_t>> fused_groups() const {
    std::vector<std::vector<size_t>> out;
    for (const auto& members : groups_) {
      if (members.size() > 1 || (members.size() == 1 && stretches_an_operand(members[0]))) {
        out.push_back(members);
      }
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
  const Shape& shape_of(int var) const { return program_.vars[static_cast<size_t>(var)].shape; }

  const Shape& output_shape(size_t e) const { return shape_of(program_.equations[e].outputs[0]); }

  bool stretches_an_operand(size_t e) const {
    const ir::Equation& equation = program_.equations[e];
    if (is_broadcast(equation)) return false;
    for (int var : equation.inputs) {
      if (!shape_of(var).empty() && shape_of(var) != output_shape(e)) return true;
    }
    return false;
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

  // A broadcast is a view only for its group's members: one that something else reads leaves
  // its group and runs (materialised) where it stands, before every reader. Its group loses a
  // member without inputs from the group, so what it computes and where it runs stay valid.
  void materialise_escaping_broadcasts() {
    std::vector<size_t> leaving;
    for (size_t e = 0; e < program_.equations.size(); ++e) {
      const ir::Equation& equation = program_.equations[e];
      if (group_of_[e] >= 0 && is_broadcast(equation) && escapes(equation.outputs[0])) {
        leaving.push_back(e);
      }
    }
    for (size_t e : leaving) {
      auto& members = groups_[static_cast<size_t>(group_of_[e])];
      members.erase(std::find(members.begin(), members.end(), e));
      group_of_[e] = -1;
    }
  }

  const ir::Program& program_;
  std::vector<int> group_of_;
  std::vector<int> producer_;
  std::vector<std::vector<size_t>> readers_;
  std::vector<bool> is_output_;
  std::vector<std::vector<size_t>> groups_;
};

// Builds a group's FusedLoop and the equation that runs it.
class LoopBuilder {
 public:
  LoopBuilder(const ir::Program& program, const Grouping& grouping, const Shape& shape)
      : program_(program),
        grouping_(grouping),
        loop_(std::make_shared<FusedLoop>()),
        step_of_(program.vars.size(), -1),
        viewed_input_of_(program.vars.size(), -1) {
    loop_->shape = shape;
  }

  void add(const ir::Equation& member) {
    calls_ += (calls_.empty() ? "" : ",") + member.primitive->name;
    const int out = member.outputs[0];
    if (is_broadcast(member)) {
      // Its readers in the group read its operand through a view.
      const int operand = member.inputs[0];
      viewed_input_of_[static_cast<size_t>(out)] = input_index(
          operand, broadcast_strides(shape_of(operand), loop_->shape,
                                     member.params.ints("broadcast_dimensions")));
      return;
    }
    FusedLoop::Step step;
    step.block = member.primitive->f32_block;
    for (int var : member.inputs) {
      const auto v = static_cast<size_t>(var);
      if (step_of_[v] >= 0) {
        step.operands.push_back(-(step_of_[v] + 1));
        continue;
      }
      const int r = viewed_input_of_[v] >= 0
                        ? viewed_input_of_[v]
                        : input_index(var, trailing_broadcast_strides(shape_of(var), loop_->shape));
      step.operands.push_back(r);
      loop_->last_reader[static_cast<size_t>(r)] = static_cast<int>(loop_->steps.size());
    }
    step_of_[static_cast<size_t>(out)] = static_cast<int>(loop_->steps.size());
    if (grouping_.escapes(out)) {
      fused_.outputs.push_back(out);
      loop_->output_steps.push_back(loop_->steps.size());
      loop_->output_dtypes.push_back(program_.vars[static_cast<size_t>(out)].dtype);
    }
    loop_->steps.push_back(std::move(step));
  }

  ir::Equation finish(std::vector<std::unique_ptr<ir::Primitive>>& fusions) {
    auto primitive = std::make_unique<ir::Primitive>();
    primitive->name = "fusion";
    primitive->abstract_eval = [](const std::vector<ir::AbstractValue>&, const ir::Params&)
        -> std::vector<ir::AbstractValue> {
      throw std::logic_error("a fusion is made from a traced program; it is never traced itself");
    };
    primitive->kernel = [loop = loop_](const std::vector<const Buffer*>& in, const ir::Params&) {
      return run_fused_loop(*loop, in);
    };
    primitive->elementwise = true;
    fused_.primitive = primitive.get();
    fused_.params = ir::Params{{"kind", std::string("kLoop")}, {"calls", calls_}};
    fusions.push_back(std::move(primitive));
    return std::move(fused_);
  }

 private:
  const Shape& shape_of(int var) const { return program_.vars[static_cast<size_t>(var)].shape; }

  // The fused equation's input reading `var` under `strides`, added on first use.
  int input_index(int var, std::vector<int64_t> strides) {
    for (size_t r = 0; r < fused_.inputs.size(); ++r) {
      if (fused_.inputs[r] == var && input_strides_[r] == strides) return static_cast<int>(r);
    }
    const ir::AbstractValue& value = program_.vars[static_cast<size_t>(var)];
    const Read read = value.dtype != DType::f32                   ? Read::kGathered
                      : shape_num_elements(value.shape) == 1      ? Read::kScalar
                      : value.shape == loop_->shape               ? Read::kFull
                                                                  : Read::kGathered;
    loop_->inputs.push_back({read, value.dtype, BroadcastRead(loop_->shape, strides)});
    loop_->last_reader.push_back(-1);
    fused_.inputs.push_back(var);
    input_strides_.push_back(std::move(strides));
    return static_cast<int>(fused_.inputs.size() - 1);
  }

  const ir::Program& program_;
  const Grouping& grouping_;
  std::shared_ptr<FusedLoop> loop_;
  ir::Equation fused_;
  std::vector<std::vector<int64_t>> input_strides_;  // per input of fused_
  std::vector<int> step_of_;          // var -> the step computing it
  std::vector<int> viewed_input_of_;  // a broadcast member's value -> the input it views
  std::string calls_;
};

// The equation that runs `members` as one loop, with its primitive.
ir::Equation fused_equation(const ir::Program& program, const Grouping& grouping,
                            const std::vector<size_t>& members,
                            std::vector<std::unique_ptr<ir::Primitive>>& fusions) {
  const ir::Equation& last = program.equations[members.back()];
  LoopBuilder builder(program, grouping, program.vars[static_cast<size_t>(last.outputs[0])].shape);
  for (size_t m : members) builder.add(program.equations[m]);
  return builder.finish(fusions);
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
