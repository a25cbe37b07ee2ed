// The probe programs of scenario_programs.h: each looks at one engine behaviour a document
// describes (P5, P7, P13, P14) and reports what it saw. The claims' probes (C1, C2) have files
// of their own.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "parity/common/error.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/device.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/pmap.h"
#include "pmap_engine/random_ops.h"
#include "programs/claim_probes.h"
#include "programs/program_parts.h"
#include "step_plan.h"

namespace parity::engine_trainer {
namespace {

// P7 (002 §2.1): loss = pmap(loss_fn)(params, x, y) is one loss per device.
ProbeResult probe_device_axis(const CaseSpec& spec) {
  const int64_t devices = spec.parallel.replicas;
  const MappedBatch batch =
      first_samples(spec, "probe-device-axis", devices, spec.data.per_replica_batch);
  const pe::Array losses = pe::pmap(case_loss(spec), broadcast_params_options(spec))(
                               {case_params(spec), batch.x, batch.y})
                               .leaf();
  const std::vector<double> values = losses.to_doubles();
  double mean = 0;
  for (double value : values) mean += value / static_cast<double>(values.size());
  ProbeResult result;
  result.as_expected = losses.shape() == pe::Shape{devices};
  result.figures.set_text("loss_type", pe::type_to_string(losses.dtype(), losses.shape()));
  result.figures.set("device0_loss", values.front());
  result.figures.set("mean_loss", mean);
  result.observed = fmt::format(
      "pmap(loss_fn)(params, x, y) returns {}: one loss per device (device 0: {:.6f}); "
      "printing it shows a vector; the scalar to log is its mean, {:.6f} (equal per-device "
      "batches), or out[0] for device 0 alone",
      pe::type_to_string(losses.dtype(), losses.shape()), values.front(), mean);
  return result;
}

// P5 (002 §2.1, §4.4): dropout keys inside a pmapped step. Each device draws the keep mask of
// the hidden layer ([per_device, width], as flax.linen.Dropout draws it: bernoulli(key, 1 - rate))
// three ways: one key broadcast to every device (in_axes=None, the mistake), a row of
// random.split(key, devices) mapped over the devices, and fold_in(key, axis_index('data')).
// Two independent masks agree at a position with probability keep^2 + (1 - keep)^2.
ProbeResult probe_dropout_key(const CaseSpec& spec) {
  constexpr double kRate = 0.5;  // torch.nn.Dropout's default p; flax's Dropout has none
  const int64_t devices = spec.parallel.replicas;
  const pe::Shape mask_shape = {spec.data.per_replica_batch, spec.model.widths.at(1)};
  const pe::Array key = pe::random::prng_key_data(spec.init.seed);
  const pe::TreeFunction masks = [&](const std::vector<pe::Tree>& args) {
    const pe::Array& shared_key = args[0].leaf();
    const pe::Array& split_key = args[1].leaf();
    const pe::Array folded_key = pe::random::fold_in(shared_key, pe::axis_index("data"));
    return pe::Tree::tuple({pe::Tree(pe::random::bernoulli(shared_key, 1 - kRate, mask_shape)),
                            pe::Tree(pe::random::bernoulli(split_key, 1 - kRate, mask_shape)),
                            pe::Tree(pe::random::bernoulli(folded_key, 1 - kRate, mask_shape))});
  };
  pe::PmapOptions options;
  options.axis_name = "data";
  options.in_axes = {std::nullopt, 0};
  options.devices = pe::DeviceSet(static_cast<int>(devices));
  const pe::Tree drawn =
      pe::pmap(masks, options)({pe::Tree(key), pe::Tree(pe::random::split(key, devices))});

  // The fraction of positions where two devices' masks agree, over every pair of devices.
  const auto agreement = [devices](const pe::Array& stacked) {
    const std::vector<double> values = stacked.to_doubles();
    const auto per_device = static_cast<int64_t>(values.size()) / devices;
    int64_t agree = 0, compared = 0;
    for (int64_t a = 0; a < devices; ++a) {
      for (int64_t b = a + 1; b < devices; ++b) {
        for (int64_t i = 0; i < per_device; ++i) {
          agree += values[a * per_device + i] == values[b * per_device + i] ? 1 : 0;
        }
        compared += per_device;
      }
    }
    return static_cast<double>(agree) / static_cast<double>(compared);
  };
  const double shared = agreement(drawn[0].leaf());
  const double split = agreement(drawn[1].leaf());
  const double folded = agreement(drawn[2].leaf());
  const double independent = (1 - kRate) * (1 - kRate) + kRate * kRate;
  // Independent masks: the agreement's standard deviation over devices*(devices-1)/2 pairs of
  // batch*width positions is below 0.001 for the case models; 0.01 is ten of them and more.
  constexpr double kSampling = 0.01;
  ProbeResult result;
  result.as_expected = shared == 1.0 && std::abs(split - independent) < kSampling &&
                       std::abs(folded - independent) < kSampling;
  result.figures.set("agreement_shared_key", shared);
  result.figures.set("agreement_split_keys", split);
  result.figures.set("agreement_folded_keys", folded);
  result.figures.set("agreement_independent", independent);
  result.observed = fmt::format(
      "dropout rate {} on {} devices, masks {}: one key on every device gives masks that agree "
      "at {:.2f}% of positions (every device drops the same units); split(key, {}) {:.2f}% and "
      "fold_in(key, axis_index) {:.2f}%, where independent masks agree at {:.2f}%",
      kRate, devices, pe::type_to_string(pe::DType::bool_, mask_shape), 100 * shared, devices,
      100 * split, 100 * folded, 100 * independent);
  return result;
}

std::string ids_of(const pe::DeviceSet& set) {
  std::vector<int> ids;
  for (const pe::Device& device : set.devices()) ids.push_back(device.id);
  return fmt::format("[{}]", fmt::join(ids, ", "));
}

// P13 (001 §2): the device list, listed several times and from the environment.
ProbeResult probe_device_order(const CaseSpec& spec) {
  const auto count = static_cast<int>(spec.parallel.replicas);
  const std::vector<pe::DeviceSet> listings = {pe::DeviceSet(count), pe::DeviceSet(count),
                                               pe::DeviceSet::from_environment(count)};
  bool sorted_and_stable = true;
  for (const pe::DeviceSet& listing : listings) {
    const auto& devices = listing.devices();
    sorted_and_stable &=
        std::is_sorted(devices.begin(), devices.end(),
                       [](const pe::Device& a, const pe::Device& b) { return a.id < b.id; }) &&
        ids_of(listing) == ids_of(listings.front());
  }
  ProbeResult result;
  result.as_expected = sorted_and_stable;
  result.figures.set("listings", static_cast<double>(listings.size()));
  result.figures.set_text("ids", ids_of(listings.front()));
  result.figures.set_text("first_device", listings.front().devices().front().to_string());
  result.observed = fmt::format(
      "{} listings (two made in code, one from the environment) all give ids {}, sorted: "
      "devices[0] is {} every time",
      listings.size(), ids_of(listings.front()), listings.front().devices().front().to_string());
  return result;
}

// P14 (001 §3.3): which calls of a jitted step trace it again. The step takes a learning rate
// as an array (traced) and a mode as a static argument.
ProbeResult probe_recompilation(const CaseSpec& spec) {
  const pe::TreeFunction loss_fn = case_loss(spec);
  pe::JitOptions options;
  options.static_argnums = {4};
  const pe::Jitted step = pe::jit(
      [loss_fn](const std::vector<pe::Tree>& args) {
        const pe::Array loss = loss_fn({args[0], args[1], args[2]}).leaf();
        // args[4] is static: concrete while tracing, so the function may branch on it.
        const bool doubled = args[4].leaf().to_doubles().front() != 0;
        return pe::Tree(loss * args[3].leaf() * (doubled ? 2.0 : 1.0));
      },
      options);
  const int64_t batch = spec.data.per_replica_batch;
  const auto [x, y] = global_samples(spec, "probe-recompilation", batch);
  const auto [x_half, y_half] = global_samples(spec, "probe-recompilation", batch / 2);
  const pe::Tree params = case_params(spec);
  const auto scalar = [](double value) { return pe::Tree(pe::full({}, value, pe::DType::f32)); };
  struct Call {
    const char* what;
    pe::Array x, y;
    double lr, mode;
  };
  const std::vector<Call> calls = {{"first call", x, y, 1e-3, 0},
                                   {"another learning rate (an array)", x, y, 2e-3, 0},
                                   {"half the batch", x_half, y_half, 1e-3, 0},
                                   {"another static mode", x, y, 1e-3, 1},
                                   {"the first signature again", x, y, 1e-3, 0}};
  std::vector<std::string> traced;
  for (const Call& call : calls) {
    const int64_t before = step.cache_stats().misses;
    step({params, pe::Tree(call.x), pe::Tree(call.y), scalar(call.lr), scalar(call.mode)});
    if (step.cache_stats().misses > before) traced.emplace_back(call.what);
  }
  ProbeResult result;
  result.as_expected =
      traced == std::vector<std::string>{"first call", "half the batch", "another static mode"};
  result.figures.set("calls", static_cast<double>(calls.size()));
  result.figures.set("traces", static_cast<double>(traced.size()));
  result.figures.set_text("traced", fmt::format("{}", fmt::join(traced, ", ")));
  result.observed = fmt::format(
      "{} calls, {} traces ({}); another learning rate passed as an array reused the trace, as "
      "did the first signature again",
      calls.size(), traced.size(), fmt::join(traced, ", "));
  return result;
}

}  // namespace

ProbeResult run_probe_program(const CaseSpec& spec) {
  const pe::ScopedJaxRelease release = case_jax_release(spec);
  const EngineProgram& program = find_engine_program(spec.scenario.engine_program);
  require_program_trains_model(spec, program);
  switch (program.probe) {
    case Probe::kDeviceAxis:
      return probe_device_axis(spec);
    case Probe::kDeviceOrder:
      return probe_device_order(spec);
    case Probe::kRecompilation:
      return probe_recompilation(spec);
    case Probe::kDropoutKey:
      return probe_dropout_key(spec);
    case Probe::kCommunicationVolume:
      return probe_communication_volume(spec);
    case Probe::kMemory7b:
      return probe_memory_7b(spec);
    case Probe::kFewerDevices:
      return probe_fewer_devices(spec);
    case Probe::kDebugging:
      return probe_debugging(spec);
    case Probe::kNone:
      break;
  }
  throw InternalError("engine program '" + program.name + "' is not a probe program");
}

}  // namespace parity::engine_trainer
