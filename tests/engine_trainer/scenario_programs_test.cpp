// The engine programs of the scenario cases (parity/engine_trainer/scenario_programs.h), one
// step each on 8 devices, checked against what their JAX counterparts compute. Expected values are
// derived: scaling by 8 (a power of two) and dividing by it are exact in binary floating point,
// so the relations below hold bit for bit, not within a tolerance.
#include "programs/program_parts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "command.h"
#include "models/model.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "test_files.h"

namespace parity::engine_trainer {
namespace {

constexpr int64_t kDevices = 8;

// mlp2-fmnist, one step, 16 samples a device; `overrides` are --set lines on top.
CaseSpec one_step_case(const std::vector<std::string>& overrides = {}) {
  std::vector<std::string> sets = {"train.steps=1", "train.record_steps=[0]",
                                   "data.per_replica_batch=16"};
  sets.insert(sets.end(), overrides.begin(), overrides.end());
  return load_case("mlp2-fmnist", sets);
}

// Trains one step with `program` and returns the run directory.
RunDir train_one_step(const std::string& program, const testing::TempDir& dir,
                      const std::vector<std::string>& overrides = {}) {
  const CaseSpec spec = one_step_case(overrides);
  const std::filesystem::path init = dir.path("init.safetensors");
  if (!std::filesystem::exists(init)) {
    write_safetensors(init, init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale));
  }
  engine_trainer::EngineOptions options;
  options.init_file = init;
  options.out_dir = dir.path(program + (overrides.empty() ? "" : "-overridden"));
  options.quiet = true;
  options.step.program = program;
  engine_trainer::train(spec, options);
  return read_run_dir(options.out_dir);
}

NamedTensors step_tensors(const RunDir& run) {
  return read_safetensors(run.dir / "tensors" / "step_000000.safetensors").tensors;
}

std::vector<float> floats(const HostTensor& tensor) {
  std::vector<float> values(tensor.num_elements());
  std::memcpy(values.data(), tensor.bytes.data(), tensor.num_bytes());
  return values;
}

TEST(ScenarioPrograms, EveryNamedProgramIsImplemented) {
  for (const EngineProgram& program : engine_programs()) {
    if (program.kind != ProgramKind::kTrains) continue;
    EXPECT_NO_THROW(mapped_gradients(program, [](const std::vector<pmap_engine::Tree>& a) {
      return a[0];
    })) << program.name;
  }
}

// One step of `program` records the same loss, gradients, parameters and digests as the
// faithful pmean step, bit for bit.
void expect_same_bits_as_pmean(const std::string& program,
                               const std::vector<std::string>& overrides = {}) {
  testing::TempDir dir;
  const RunDir pmean_run = train_one_step("pmean", dir, overrides);
  const RunDir other_run = train_one_step(program, dir, overrides);
  EXPECT_EQ(other_run.steps.at(0).loss, pmean_run.steps.at(0).loss) << program;
  const NamedTensors pmean = step_tensors(pmean_run);
  const NamedTensors other = step_tensors(other_run);
  for (const auto& [name, tensor] : pmean) {
    EXPECT_TRUE(other.at(name).bytes == tensor.bytes) << program << ": " << name;
  }
}

// S2 (000 §4.3): psum, then a division by the device count, is pmean.
TEST(ScenarioPrograms, PsumThenDivideIsPmeanBitForBit) { expect_same_bits_as_pmean("psum-divide"); }

// P10 (002 §3.4): leaving the f16 loss uncast changes nothing. The cast of the finished f16
// loss to f32 is exact, and in reverse mode its transpose casts the f32 cotangent 1.0 back to
// f16 1.0 (jax/_src/lax/lax.py, _convert_element_type_transpose_rule: a convert back), which is
// the seed the uncast loss starts from.
TEST(ScenarioPrograms, AnF16LossWithoutTheCastTrainsTheSameBitsAsWithIt) {
  expect_same_bits_as_pmean("loss-without-cast", {"train.dtype=f16"});
}

// S10 (002 §4.3): four steps on 8 devices, a checkpoint after two, the last two on 4 devices
// reading 32 samples each. Before the checkpoint the run is the pmean run bit for bit; after it
// the same global batches (as sets) give the same losses up to the reduction order (a pmean of
// 4 means of 32 instead of 8 of 16).
TEST(ScenarioPrograms, CheckpointReshardResumesOnHalfTheDevicesOnTheSameCurve) {
  testing::TempDir dir;
  const std::vector<std::string> four_steps = {"train.steps=4", "train.record_steps=[1, 3]"};
  const RunDir pmean = train_one_step("pmean", dir, four_steps);
  const RunDir resumed = train_one_step("checkpoint-reshard", dir, four_steps);
  ASSERT_EQ(resumed.steps.size(), 4u);
  for (size_t s = 0; s < 4; ++s) {
    const StepMetrics& a = resumed.steps[s];
    const StepMetrics& b = pmean.steps[s];
    EXPECT_EQ(a.replica_losses.size(), s < 2 ? 8u : 4u) << "step " << s;
    EXPECT_EQ(a.samples_set_digest, b.samples_set_digest) << "step " << s;
    if (s < 2) {
      EXPECT_EQ(a.loss, b.loss) << "step " << s;
      EXPECT_EQ(a.samples_digest, b.samples_digest) << "step " << s;
    } else {
      // assert_close's f32 rtol (torch.testing): reordering sums of 512 terms stays far inside.
      EXPECT_NEAR(a.loss, b.loss, 1.3e-6 * std::abs(b.loss)) << "step " << s;
      EXPECT_NE(a.samples_digest, b.samples_digest) << "step " << s;  // another assignment
    }
  }
  const auto checkpoint = resumed.dir / "checkpoint" / "step_000002.safetensors";
  ASSERT_TRUE(std::filesystem::exists(checkpoint));
  const SafetensorsFile file = read_safetensors(checkpoint);
  EXPECT_EQ(file.metadata.at("device_count"), "8");
  EXPECT_EQ(file.metadata.at("step"), "2");
  // The saved params are replica 0 after step 1: the pmean run's recorded params, bit for bit.
  const NamedTensors recorded =
      read_safetensors(pmean.dir / "tensors" / "step_000001.safetensors").tensors;
  EXPECT_TRUE(file.tensors.at("params/dense0.kernel").bytes ==
              recorded.at("params/dense0.kernel").bytes);
}

// S4 (000 §5.3): params broadcast with in_axes=None (and returned with out_axes=None) train
// exactly what replicated params train.
TEST(ScenarioPrograms, BroadcastParamsTrainWhatReplicatedParamsTrain) {
  expect_same_bits_as_pmean("params-in-axes-none");
}

// P3 (000 §5.2): grad of a psum'd loss is the device count times the local gradient (psum
// transposes to psum), not the sum of the devices' gradients; the loss is the psum.
TEST(ScenarioPrograms, GradOfAPsummedLossIsEightTimesTheLocalGradient) {
  testing::TempDir dir;
  const RunDir local = train_one_step("no-grad-reduction", dir);
  const RunDir summed_loss = train_one_step("psum-loss-in-grad", dir);
  const NamedTensors local_tensors = step_tensors(local);
  const NamedTensors summed_tensors = step_tensors(summed_loss);
  for (const auto& [name, tensor] : local_tensors) {
    if (name.rfind("grads/", 0) != 0) continue;
    const std::vector<float> expected = floats(tensor);
    const std::vector<float> found = floats(summed_tensors.at(name));
    ASSERT_EQ(found.size(), expected.size());
    for (size_t i = 0; i < found.size(); ++i) {
      ASSERT_EQ(found[i], 8.0f * expected[i]) << name << "[" << i << "]";
    }
  }
  // Every device reports the psum of the local losses: the same value, 8 times their mean.
  const StepMetrics& losses = summed_loss.steps.front();
  const StepMetrics& local_losses = local.steps.front();
  double sum = 0;
  for (double loss : local_losses.replica_losses) sum += loss;
  for (double loss : losses.replica_losses) EXPECT_NEAR(loss, sum, 1e-5 * sum);
}

// P3b (000 §5.2 under jax.shard_map(check_vma=True), params P(), x and y P('data')): the
// replicated params are pvary'd where they meet the device's batch, and pvary transposes to
// psum_invariant, so every device's gradient is the sum of the devices' local gradients, those
// the no-grad-reduction program applies on each device. psum_invariant folds the devices in
// device order in f32, as the expected sum is folded here, so they agree bit for bit; the loss
// is the psum of the local losses likewise.
TEST(ScenarioPrograms, UnderShardMapGradOfAPsummedLossIsTheSumOfTheDevicesGradients) {
  const CaseSpec spec = one_step_case();
  const MappedBatch batch =
      first_samples(spec, "psum-loss-in-grad-shard-map", kDevices, spec.data.per_replica_batch);
  const pe::Tree params = case_params(spec);
  // Fresh each call: a step donates params and opt_state.
  const auto args = [&] {
    return std::vector<pe::Tree>{
        engine_trainer::replicate(params, kDevices),
        engine_trainer::replicate(make_optimizer(spec.train).init(params), kDevices), batch.x,
        batch.y};
  };
  const auto step = [&](const std::string& program) {
    engine_trainer::EngineStepOptions options;
    options.program = program;
    return engine_trainer::make_mapped_train_step(spec, pe::DeviceSet(kDevices), options);
  };
  const pe::Tree local = step("no-grad-reduction")(args());
  const engine_trainer::MappedTrainStep shard_mapped = step("psum-loss-in-grad-shard-map");
  const pe::Tree summed = shard_mapped(args());

  const auto devices = static_cast<size_t>(kDevices);
  const std::vector<pe::Array> local_grads = local[3].leaves();
  const std::vector<pe::Array> summed_grads = summed[3].leaves();
  ASSERT_EQ(summed_grads.size(), local_grads.size());
  for (size_t leaf = 0; leaf < local_grads.size(); ++leaf) {
    const std::vector<float> per_device = local_grads[leaf].to_floats();
    const std::vector<float> found = summed_grads[leaf].to_floats();
    ASSERT_EQ(found.size(), per_device.size());
    const size_t count = per_device.size() / devices;
    for (size_t i = 0; i < count; ++i) {
      float sum = per_device[i];
      for (size_t d = 1; d < devices; ++d) sum += per_device[d * count + i];
      for (size_t d = 0; d < devices; ++d) {
        ASSERT_EQ(found[d * count + i], sum) << "leaf " << leaf << "[" << i << "] device " << d;
      }
    }
  }
  const std::vector<float> local_losses = local[2].leaf().to_floats();
  float loss_sum = local_losses[0];
  for (size_t d = 1; d < devices; ++d) loss_sum += local_losses[d];
  for (float loss : summed[2].leaf().to_floats()) EXPECT_EQ(loss, loss_sum);

  // The program JAX traces: the params pvary'd, the loss psum'd by psum_invariant, and the
  // gradients summed by psum_invariant (pvary's transpose); no plain psum.
  const std::string text = shard_mapped.program_text(args());
  EXPECT_NE(text.find("pvary[axes=('data',)]"), std::string::npos) << text;
  EXPECT_NE(text.find("psum_invariant[axes=('data',)"), std::string::npos) << text;
  EXPECT_EQ(text.find(" psum["), std::string::npos) << text;
}

// P11: without a reduction every device applies its own gradient, so the replicas part after
// the first update; P4: with per-device initialisation they differ before it.
TEST(ScenarioPrograms, UnreducedGradientsAndPerDeviceInitLeaveReplicasDifferent) {
  testing::TempDir dir;
  for (const std::string program : {"no-grad-reduction", "init-per-device", "pmean"}) {
    const NamedTensors tensors = step_tensors(train_one_step(program, dir));
    const HostTensor& digests = tensors.at("replicas/param_digests");
    const auto* values = digests.data_as<int64_t>();
    int64_t distinct = 0;
    for (int64_t d = 1; d < kDevices; ++d) distinct += values[d] != values[0];
    if (program == "pmean") {
      EXPECT_EQ(distinct, 0) << program;
    } else {
      EXPECT_EQ(distinct, kDevices - 1) << program;
    }
  }
}

TEST(ScenarioPrograms, ErrorProgramsRaiseJaxsErrors) {
  CaseSpec spec = one_step_case();
  spec.scenario.engine_program = "axis-name-mismatch";
  const std::optional<std::string> unbound = run_error_program(spec);
  ASSERT_TRUE(unbound.has_value());
  EXPECT_NE(unbound->find("Found an unbound axis name: devices. To fix this, please call psum "
                          "under `jax.shard_map`."),
            std::string::npos)
      << *unbound;
  EXPECT_NE(unbound->find("names bound here are ['batch']"), std::string::npos) << *unbound;

  spec.scenario.engine_program = "batch-65-on-8";
  const std::optional<std::string> too_many = run_error_program(spec);
  ASSERT_TRUE(too_many.has_value());
  EXPECT_NE(too_many->find("One of pjit arguments with pytree key path flat_args[4] was given "
                           "the sharding NamedSharding(mesh=Mesh('data': 8, axis_types=(Auto,)), "
                           "spec=P('data',), memory_kind=device) implies that array axis 0 is "
                           "partitioned 8 times, but the dimension size is 65"),
            std::string::npos)
      << *too_many;

  // 002 §2.2's jitted step: two in_shardings for four arguments (api_util.py's wording), and
  // with four P('data') shardings the first leaf that cannot split 8 ways, the (10,) bias
  // (pjit.py pjit_check_aval_sharding; dict leaves flatten in key order, dense1.bias first),
  // named after p_train_step_jit's parameter (jax/_src/api_util.py _non_static_arg_names).
  spec.scenario.engine_program = "jit-named-sharding";
  const std::optional<std::string> short_tuple = run_error_program(spec);
  ASSERT_TRUE(short_tuple.has_value());
  EXPECT_NE(short_tuple->find("got a tuple or list of length 2 for an args tuple of length 4"),
            std::string::npos)
      << *short_tuple;
  spec.scenario.engine_program = "jit-params-sharded";
  const std::optional<std::string> indivisible = run_error_program(spec);
  ASSERT_TRUE(indivisible.has_value());
  EXPECT_NE(indivisible->find("pytree key path params['dense1']['bias'] was given the sharding "
                              "NamedSharding(mesh=Mesh('data': 8, axis_types=(Auto,)), "
                              "spec=P('data',), memory_kind=device) implies that array axis 0 "
                              "is partitioned 8 times"),
            std::string::npos)
      << *indivisible;

  // A training program is refused by the trainer's error path, and not an error program here.
  spec.scenario.engine_program = "pmean";
  EXPECT_THROW(run_error_program(spec), InternalError);
}

TEST(ScenarioPrograms, ErrorProgramsRaiseTheTextOfTheCasesJaxRelease) {
  // Case key jax.version: P1's program at jax-v0.4.38 raises the bare NameError of
  // jax/_src/lax/parallel.py _check_axis_names, at the default (jax-v0.11.0) the long one.
  CaseSpec spec = one_step_case();
  spec.scenario.engine_program = "axis-name-mismatch";
  spec.jax.version = "0.4.38";
  const std::optional<std::string> old_text = run_error_program(spec);
  ASSERT_TRUE(old_text.has_value());
  EXPECT_EQ(old_text->rfind("unbound axis name: devices (pmap_engine: raised by pmean;", 0), 0)
      << *old_text;
  EXPECT_EQ(pmap_engine::jax_release(), pmap_engine::kDefaultJaxRelease);  // restored after

  spec.jax.version = "0.11.0";
  const std::optional<std::string> new_text = run_error_program(spec);
  ASSERT_TRUE(new_text.has_value());
  EXPECT_EQ(new_text->rfind("Found an unbound axis name: devices. To fix this, please call "
                            "psum under `jax.shard_map`. (pmap_engine: raised by pmean;",
                            0),
            0)
      << *new_text;

  // P6 at jax-v0.4.38: jax/_src/interpreters/pxla.py UnloadedPmapExecutable.from_hlo.
  spec.scenario.engine_program = "batch-65-on-8";
  spec.jax.version = "0.4.38";
  const std::optional<std::string> too_many = run_error_program(spec);
  ASSERT_TRUE(too_many.has_value());
  EXPECT_EQ(too_many->rfind("compiling computation that requires 65 logical devices, but only 8 "
                            "XLA devices are available (num_replicas=65)",
                            0),
            0)
      << *too_many;
}

TEST(ScenarioPrograms, ProbesSeeWhatJaxDoes) {
  CaseSpec spec = one_step_case();
  spec.scenario.engine_program = "probe-device-axis";
  const ProbeResult axis = run_probe_program(spec);
  EXPECT_TRUE(axis.as_expected) << axis.observed;
  EXPECT_NE(axis.observed.find("returns f32[8]"), std::string::npos) << axis.observed;

  spec.scenario.engine_program = "probe-device-order";
  const ProbeResult order = run_probe_program(spec);
  EXPECT_TRUE(order.as_expected) << order.observed;
  EXPECT_NE(order.observed.find("ids [0, 1, 2, 3, 4, 5, 6, 7]"), std::string::npos)
      << order.observed;

  // jit's cache key is the tree structure, shapes, dtypes and static values (jax/_src/api.py
  // and pjit.py): a new shape and a new static value retrace, a new traced value does not.
  spec.scenario.engine_program = "probe-recompilation";
  const ProbeResult retrace = run_probe_program(spec);
  EXPECT_TRUE(retrace.as_expected) << retrace.observed;
  EXPECT_NE(retrace.observed.find("5 calls, 3 traces (first call, half the batch, another "
                                  "static mode)"),
            std::string::npos)
      << retrace.observed;

  // One key on every device draws one mask; split or folded keys draw independent masks, which
  // agree at rate^2 + (1 - rate)^2 = 50% of positions for rate 0.5 (jax/_src/random.py
  // bernoulli: uniform < p under each device's own key).
  spec.scenario.engine_program = "probe-dropout-key";
  const ProbeResult dropout = run_probe_program(spec);
  EXPECT_TRUE(dropout.as_expected) << dropout.observed;
  EXPECT_NE(dropout.observed.find("masks bool[16,256]: one key on every device gives masks that "
                                  "agree at 100.00% of positions"),
            std::string::npos)
      << dropout.observed;
}

// P6's fact-check quotes what a leading 64 raises and what DistributedSampler does with 65
// samples on 8 ranks: ceil(65 / 8) = 9 per rank, 72 in all, so 9 * 8 - 65 = 7 repeated in all,
// not per rank (torch's DistributedSampler pads to num_samples * num_replicas). A leading 64 is
// no batch of 64 either:
// at jax-v0.11.0 pmap reshapes each device's block (8, 1, 784) and lax.squeeze refuses axis 0
// (jax/_src/lax/lax.py _compute_squeeze_shape); at jax-v0.4.38 it asks for 64 devices
// (interpreters/pxla.py UnloadedPmapExecutable.from_hlo).
TEST(ScenarioPrograms, P6sFiguresAreTheLeading64sErrorAndTheSamplersPadding) {
  CaseSpec spec = one_step_case();
  spec.scenario.engine_program = "batch-65-on-8";
  const ObservedFigures figures = error_program_figures(spec);
  EXPECT_EQ(figures.number("leading_axis"), 65);
  EXPECT_EQ(figures.number("leading_axis_below"), 64);
  EXPECT_EQ(figures.number("sampler_per_rank"), 9);
  EXPECT_EQ(figures.number("sampler_total"), 72);
  EXPECT_EQ(figures.number("sampler_repeated"), 7);
  EXPECT_NE(figures.formatted("error_below")->find("cannot select an axis to squeeze out which "
                                                   "has size not equal to one"),
            std::string::npos)
      << *figures.formatted("error_below");
  spec.jax.version = "0.4.38";
  EXPECT_NE(error_program_figures(spec).formatted("error_below")->find(
                "requires 64 logical devices, but only 8"),
            std::string::npos);
  // Every other error program quotes nothing besides its error.
  spec.scenario.engine_program = "axis-name-mismatch";
  EXPECT_TRUE(error_program_figures(spec).names().empty());
}

// 000 §3.1 says pmap's axis 0 must equal the device count; JAX maps it onto the first devices
// when it is shorter (jax-v0.11.0 jax/_src/pmap.py _get_mesh_devices slices devices[:size];
// jax-v0.4.38 interpreters/pxla.py takes the first size devices) and refuses a longer one.
TEST(ClaimProbes, PmapMapsAShorterLeadingAxisOntoTheFirstDevices) {
  CaseSpec spec = one_step_case();
  spec.scenario.engine_program = "probe-fewer-devices";
  const ProbeResult probe = run_probe_program(spec);
  EXPECT_TRUE(probe.as_expected) << probe.observed;
  EXPECT_EQ(probe.figures.number("mapped"), 4);
  EXPECT_EQ(probe.figures.formatted("loss_type"), "f32[4]");
  EXPECT_NE(probe.figures.formatted("error_over")->find("dimension size is 9"), std::string::npos)
      << *probe.figures.formatted("error_over");
  // jax-v0.11.0 jax/_src/pjit.py pjit_check_aval_sharding goes on with the Python source line,
  // which the quote marks as left out.
  const std::string over = *probe.figures.formatted("error_over");
  const std::string tail = "should evenly divide the shape). This error occurs at source: …";
  EXPECT_TRUE(over.size() >= tail.size() && over.compare(over.size() - tail.size(), tail.size(),
                                                          tail) == 0)
      << over;
}

// A quote of JAX's text is JAX's words only: the engine's note in parentheses is cut off, and
// where JAX's message goes on with what the engine cannot write (the Python source line, the
// function being traced) an ellipsis says so. jax-v0.4.38's jit divisibility text ends where
// the engine's does.
TEST(ScenarioPrograms, AJaxQuoteMarksWhatJaxGoesOnToSay) {
  EXPECT_EQ(jax_quote("unbound axis name: devices (pmap_engine: raised by pmean; ...)"),
            "unbound axis name: devices");
  EXPECT_EQ(jax_quote("One of pjit arguments was given the sharding S implies that array axis 0 "
                      "is partitioned 8 times, but the dimension size is 9 (...). (pmap_engine: "
                      "hint)"),
            "One of pjit arguments was given the sharding S implies that array axis 0 is "
            "partitioned 8 times, but the dimension size is 9 (...). This error occurs at "
            "source: …");
  const std::string old_text =
      "One of pjit arguments was given the sharding of S, which implies that the global size of "
      "its dimension 0 should be divisible by 8, but it is equal to 9 (full shape: (9,))";
  EXPECT_EQ(jax_quote(old_text), old_text);
  EXPECT_EQ(jax_quote("The numpy.ndarray conversion method __array__() was called on traced "
                      "array with shape float32[2] (pmap_engine: hint)"),
            "The numpy.ndarray conversion method __array__() was called on traced array with "
            "shape float32[2]…");
  EXPECT_EQ(jax_quote("Abstract tracer value encountered where concrete value is expected: the "
                      "engine's words"),
            "Abstract tracer value encountered where concrete value is expected: …");
}

// 001 §4.2-4.3: np.sin on a tracer raises TracerArrayConversionError (jax/_src/core.py
// Tracer.__array__; errors.py, the same text at jax-v0.4.38 and jax-v0.11.0), not the
// ConcretizationTypeError the document quotes; a host print inside jit runs once, at trace
// time, on a tracer, and debug_print at each of the three calls.
TEST(ClaimProbes, DebuggingInsideJitBehavesAsJaxDoes) {
  CaseSpec spec = one_step_case();
  spec.scenario.engine_program = "probe-debugging";
  const ProbeResult probe = run_probe_program(spec);
  EXPECT_TRUE(probe.as_expected) << probe.observed;
  EXPECT_EQ(probe.figures.formatted("numpy_error"),
            "The numpy.ndarray conversion method __array__() was called on traced array with "
            "shape float32[16,784]…");
  EXPECT_EQ(probe.figures.formatted("concrete_error"),
            "Abstract tracer value encountered where concrete value is expected: …");
  EXPECT_EQ(probe.figures.number("host_prints"), 1);
  EXPECT_EQ(probe.figures.number("debug_print_lines"), 3);
  EXPECT_EQ(probe.figures.formatted("host_print_saw"), "a tracer of f32[]");
}

}  // namespace
}  // namespace parity::engine_trainer
