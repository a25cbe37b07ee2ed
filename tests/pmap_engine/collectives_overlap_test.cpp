// Collectives that overlap compute (runtime/mapped_schedule.h, runtime/collective_rendezvous.h):
// where the schedule starts and finishes each collective, and that running a program that way
// computes bit for bit what running it in lockstep does (every collective once all devices
// reach it, in program order), with the exact peak memory of the order each device runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "ir/axis_env.h"
#include "ir/primitive.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/optim.h"
#include "runtime/executor.h"
#include "runtime/mapped_schedule.h"
#include "runtime/program_cache.h"

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;
using testing::normal_array;

constexpr int64_t kDevices = 4;

// A two-layer MLP's train step as FSDP writes it per device under shard_map: each weight is
// split on its leading dim, all-gathered before its matmul; value_and_grad transposes the
// gathers into reduce-scatters of the gradients (psum_scatter), which an SGD step applies to
// the device's blocks.
Tree fsdp_step(const std::vector<Tree>& args) {
  const auto loss = [](const std::vector<Tree>& a) {
    const Array w0 = all_gather(a[0]["w0"].leaf(), "data", 0, true);
    const Array w1 = all_gather(a[0]["w1"].leaf(), "data", 0, true);
    const Array hidden = tanh(matmul(a[1].leaf(), w0));
    const Array logits = matmul(hidden, w1);
    return Tree(mean(softmax_cross_entropy_with_integer_labels(logits, a[2].leaf())));
  };
  const Tree out = value_and_grad(loss)({args[0], args[1], args[2]});
  const Tree& grads = out[1];
  return Tree::tuple({Tree::dict({{"w0", Tree(args[0]["w0"].leaf() - grads["w0"].leaf() * 0.1)},
                                  {"w1", Tree(args[0]["w1"].leaf() - grads["w1"].leaf() * 0.1)}}),
                      Tree(psum(out[0].leaf(), "data"))});
}

// Device d's arguments: its blocks of w0 [16, 32] and w1 [32, 10], its 8 rows of the batch.
std::vector<Tree> device_args(int64_t d) {
  const auto seed = static_cast<uint32_t>(10 * d);
  std::vector<float> labels(8);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<float>((i * 3 + d) % 10);
  return {Tree::dict({{"w0", Tree(normal_array({16 / kDevices, 32}, seed + 1) * 0.3)},
                      {"w1", Tree(normal_array({32 / kDevices, 10}, seed + 2) * 0.3)}}),
          Tree(normal_array({8, 16}, seed + 3)),
          Tree(astype(Array::from_floats({8}, labels), DType::i32))};
}

ir::Program fsdp_program() {
  const ir::ScopedAxis axis("data", kDevices);
  return runtime::trace_function(
             fsdp_step, device_args(0), {},
             [](size_t, size_t, const Array& leaf) { return leaf.shape(); }, "test")
      .program;
}

std::vector<std::vector<Buffer>> device_inputs() {
  std::vector<std::vector<Buffer>> inputs;
  for (int64_t d = 0; d < kDevices; ++d) {
    inputs.emplace_back();
    for (const Tree& arg : device_args(d)) {
      for (const Array& leaf : arg.leaves()) inputs.back().push_back(leaf.buffer("test"));
    }
  }
  return inputs;
}

const std::vector<MeshAxis>& mesh_axes() {
  static const std::vector<MeshAxis> axes = {{"data", kDevices}};
  return axes;
}

// The lockstep executor, written out: every device runs each equation in program order; a
// collective runs once all devices reach it, on all of them, in device order.
std::vector<std::vector<Buffer>> lockstep(const ir::Program& program,
                                          const std::vector<std::vector<Buffer>>& inputs) {
  std::vector<std::vector<Buffer>> values(inputs.size(), std::vector<Buffer>(program.vars.size()));
  for (size_t d = 0; d < inputs.size(); ++d) {
    for (size_t i = 0; i < program.inputs.size(); ++i) {
      values[d][static_cast<size_t>(program.inputs[i])] = inputs[d][i];
    }
    for (size_t i = 0; i < program.constants.size(); ++i) {
      values[d][static_cast<size_t>(program.constants[i])] = program.constant_values[i];
    }
  }
  const auto operands = [&](size_t d, const ir::Equation& equation) {
    std::vector<const Buffer*> buffers;
    for (int var : equation.inputs) buffers.push_back(&values[d][static_cast<size_t>(var)]);
    return buffers;
  };
  for (const ir::Equation& equation : program.equations) {
    std::vector<std::vector<Buffer>> results;
    if (equation.primitive->kernel) {
      for (size_t d = 0; d < inputs.size(); ++d) {
        results.push_back(equation.primitive->kernel(operands(d, equation), equation.params));
      }
    } else {
      std::vector<std::vector<const Buffer*>> all;
      for (size_t d = 0; d < inputs.size(); ++d) all.push_back(operands(d, equation));
      results = equation.primitive->collective_kernel(all, equation.params);
    }
    for (size_t d = 0; d < inputs.size(); ++d) {
      for (size_t o = 0; o < equation.outputs.size(); ++o) {
        values[d][static_cast<size_t>(equation.outputs[o])] = results[d][o];
      }
    }
  }
  std::vector<std::vector<Buffer>> outputs(inputs.size());
  for (size_t d = 0; d < inputs.size(); ++d) {
    for (int var : program.outputs) outputs[d].push_back(values[d][static_cast<size_t>(var)]);
  }
  return outputs;
}

std::string kinds(const ir::Program& program, const std::vector<runtime::Step>& steps) {
  std::string text;
  for (const runtime::Step& step : steps) {
    const std::string& name = program.equations[step.equation].primitive->name;
    if (step.kind == runtime::Step::Kind::kStart) text += name + "-start ";
    if (step.kind == runtime::Step::Kind::kDone) text += name + "-done ";
  }
  return text;
}

TEST(CollectiveSchedule, StartsEarlyAndFinishesLateWithOneCollectiveOfEachKindInFlight) {
  const ir::Program program = fsdp_program();
  const std::vector<runtime::Step> steps = runtime::mapped_schedule(program);
  // Every equation once as a run, every collective as a start then a done.
  std::map<size_t, std::string> seen;
  for (const runtime::Step& step : steps) {
    const bool collective = !program.equations[step.equation].primitive->kernel;
    if (step.kind == runtime::Step::Kind::kRun) {
      EXPECT_FALSE(collective);
      EXPECT_EQ(seen[step.equation], "");
      seen[step.equation] = "run";
    } else if (step.kind == runtime::Step::Kind::kStart) {
      EXPECT_TRUE(collective);
      EXPECT_EQ(seen[step.equation], "");
      seen[step.equation] = "start";
    } else {
      EXPECT_EQ(seen[step.equation], "start");
      seen[step.equation] = "done";
    }
  }
  EXPECT_EQ(seen.size(), program.equations.size());
  // The second weight's gather starts once the first is done (one all_gather in flight), before
  // the first layer's matmul: it overlaps the first layer. The gradients' reduce-scatters
  // follow, one at a time, and the loss's psum.
  EXPECT_EQ(kinds(program, steps),
            "all_gather-start all_gather-done all_gather-start all_gather-done "
            "reduce_scatter-start reduce_scatter-done reduce_scatter-start psum-start "
            "reduce_scatter-done psum-done ");
  const auto first_step = [&](runtime::Step::Kind kind, const std::string& name) {
    for (size_t s = 0; s < steps.size(); ++s) {
      if (steps[s].kind == kind && program.equations[steps[s].equation].primitive->name == name) {
        return s;
      }
    }
    return steps.size();
  };
  const auto first_matmul = first_step(runtime::Step::Kind::kRun, "dot_general");
  EXPECT_LT(first_step(runtime::Step::Kind::kStart, "all_gather") + 2, first_matmul);
  // In lockstep every collective is a wait; here fewer overlap nothing.
  EXPECT_LT(runtime::exposed_collectives(steps), 6u);
}

TEST(CollectiveSchedule, OverlappedRunIsBitIdenticalToLockstepOnAnFsdpStep) {
  const ir::Program program = fsdp_program();
  const std::vector<std::vector<Buffer>> expected = lockstep(program, device_inputs());
  for (int attempt = 0; attempt < 10; ++attempt) {
    const runtime::MappedExecutionResult result =
        runtime::execute_mapped(program, device_inputs(), {}, mesh_axes());
    ASSERT_EQ(result.per_device_outputs.size(), expected.size());
    for (size_t d = 0; d < expected.size(); ++d) {
      for (size_t o = 0; o < expected[d].size(); ++o) {
        const Buffer& got = result.per_device_outputs[d][o];
        ASSERT_EQ(got.num_bytes(), expected[d][o].num_bytes());
        EXPECT_EQ(std::memcmp(got.bytes->data(), expected[d][o].bytes->data(), got.num_bytes()), 0)
            << "device " << d << " output " << o;
      }
    }
    EXPECT_EQ(result.num_collectives, 5);
  }
}

TEST(CollectiveSchedule, PeakCountsResultsFromTheStartAndOperandsUntilTheDone) {
  // psum(x * 3) starts, x * 2 is computed while it is in flight, then the sum reads both.
  const ir::ScopedAxis axis("data", kDevices);
  const Array x = Array::from_floats({256}, std::vector<float>(256, 1.0f));
  const ir::Program program =
      runtime::trace_function(
          [](const std::vector<Tree>& a) {
            const Array summed = psum(a[0].leaf() * 3.0, "data");
            const Array doubled = a[0].leaf() * 2.0;
            return Tree(summed + doubled);
          },
          {Tree(x)}, {}, [](size_t, size_t, const Array& leaf) { return leaf.shape(); }, "test")
          .program;
  std::vector<std::vector<Buffer>> inputs(kDevices, std::vector<Buffer>{x.buffer("test")});
  const runtime::MappedExecutionResult result =
      runtime::execute_mapped(program, inputs, {}, mesh_axes());
  EXPECT_EQ(result.per_device_outputs[0][0].data<float>()[0], 14.0f);
  // While the psum is in flight, as x * 2 is computed: x, the psum's operand x * 3 (held until
  // its done), its result (reserved at its start), x * 2, and the literal 2 (the literal 3 died
  // with x * 3's product). In lockstep the operand would have died before x * 2 was computed.
  EXPECT_EQ(result.peak_bytes_per_device, 4 * 1024 + 4);
}

// Throws from its kernel when its scalar operand is 2 or more.
const ir::Primitive* kFailsFromTwo = ir::register_primitive({
    "test_overlap_fails_from_two",
    [](const std::vector<ir::AbstractValue>& in, const ir::Params&) { return in; },
    [](const std::vector<const Buffer*>& in, const ir::Params&) {
      if (in[0]->data<float>()[0] >= 2) throw std::runtime_error("too large");
      return std::vector<Buffer>{*in[0]};
    },
    nullptr,
});

TEST(CollectiveSchedule, ADeviceThatFailsWhileOthersWaitForItsCollectiveIsReported) {
  // Device 2 fails before it starts the psum the others wait for: no deadlock, its error.
  const ir::ScopedAxis axis("data", kDevices);
  const Array scalar = Array::from_floats({}, {0});
  const ir::Program program =
      runtime::trace_function(
          [](const std::vector<Tree>& a) {
            return Tree(psum(ir::bind1(*kFailsFromTwo, {a[0].leaf()}), "data") * 2.0);
          },
          {Tree(scalar)}, {}, [](size_t, size_t, const Array& leaf) { return leaf.shape(); },
          "test")
          .program;
  std::vector<std::vector<Buffer>> inputs;
  for (float value : {0.0f, 1.0f, 2.0f, 1.0f}) {
    inputs.push_back({Array::from_floats({}, {value}).buffer("test")});
  }
  for (int attempt = 0; attempt < 10; ++attempt) {
    EXPECT_THAT(
        [&] { runtime::execute_mapped(program, inputs, {}, mesh_axes()); },
        ::testing::ThrowsMessage<EngineError>(HasSubstr("device 2: test_overlap_fails_from_two")));
  }
}

}  // namespace
}  // namespace pmap_engine
