#include "programs/claim_probes.h"

#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "pmap_engine/device.h"
#include "pmap_engine/numpy_interop.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/pmap.h"

namespace parity::engine_trainer {
namespace {

// The error a call raises, or "none: it ran".
std::string error_of(const std::function<void()>& call) {
  return engine_error_of(call).value_or("none: it ran");
}

// Redirects std::cerr, where debug_print writes, into a string for its lifetime.
class CapturedStderr {
 public:
  CapturedStderr() : previous_(std::cerr.rdbuf(captured_.rdbuf())) {}
  ~CapturedStderr() { std::cerr.rdbuf(previous_); }
  CapturedStderr(const CapturedStderr&) = delete;
  CapturedStderr& operator=(const CapturedStderr&) = delete;
  std::string text() const { return captured_.str(); }

 private:
  std::ostringstream captured_;
  std::streambuf* previous_;
};

}  // namespace

ProbeResult probe_fewer_devices(const CaseSpec& spec) {
  const int64_t available = spec.parallel.replicas;
  const int64_t fewer = available / 2;
  const pe::Pmapped loss = pe::pmap(case_loss(spec), broadcast_params_options(spec));
  const auto mapped_loss = [&](int64_t leading) {
    const MappedBatch batch =
        first_samples(spec, "probe-fewer-devices", leading, spec.data.per_replica_batch);
    return loss({case_params(spec), batch.x, batch.y}).leaf();
  };
  const pe::Array fewer_losses = mapped_loss(fewer);
  const std::string too_many = jax_quote(error_of([&] { mapped_loss(available + 1); }));

  ProbeResult result;
  result.as_expected = fewer_losses.shape() == pe::Shape{fewer} && too_many.rfind("none", 0) != 0;
  result.figures.set("available_devices", static_cast<double>(available));
  result.figures.set("mapped", static_cast<double>(fewer));
  result.figures.set_text("loss_type",
                          pe::type_to_string(fewer_losses.dtype(), fewer_losses.shape()));
  result.figures.set("mapped_over", static_cast<double>(available + 1));
  result.figures.set_text("error_over", too_many);
  result.observed = fmt::format(
      "with {} devices, a leading axis of {} runs on the first {} and returns {}; a leading "
      "axis of {} raises: {}",
      available, fewer, fewer, pe::type_to_string(fewer_losses.dtype(), fewer_losses.shape()),
      available + 1, too_many);
  return result;
}

ProbeResult probe_debugging(const CaseSpec& spec) {
  const int64_t batch = spec.data.per_replica_batch;
  const auto [x, y] = global_samples(spec, "probe-debugging", batch);
  const pe::Tree params = case_params(spec);
  const pe::TreeFunction loss_fn = case_loss(spec);

  // 001 §4.2's bad_func: np.sin(x) inside jit hands NumPy a tracer.
  const pe::Jitted numpy_inside = pe::jit([](const std::vector<pe::Tree>& args) {
    const std::vector<double> host = pe::numpy_asarray(args[0].leaf());
    return pe::Tree(pe::full({}, host.front(), pe::DType::f32));
  });
  const std::string numpy_error = jax_quote(error_of([&] { numpy_inside({pe::Tree(x)}); }));
  // What "Abstract tracer value encountered" belongs to: a traced value used as a concrete one
  // (float(x), if x > 0), here the loss's value read while tracing.
  const pe::Jitted concrete_inside = pe::jit([&](const std::vector<pe::Tree>& args) {
    const pe::Array loss = loss_fn(args).leaf();
    return pe::Tree(pe::full({}, loss.to_doubles().front(), pe::DType::f32));
  });
  const std::string concrete_error =
      error_of([&] { concrete_inside({params, pe::Tree(x), pe::Tree(y)}); });

  // 001 §4.3: print inside jit. A host-side print is Python code: it runs while jit traces, once
  // per new signature, and sees a tracer; jax.debug.print is part of the program and prints at
  // every call.
  int host_prints = 0;
  std::string host_saw;
  const pe::Jitted step = pe::jit([&](const std::vector<pe::Tree>& args) {
    const pe::Array loss = loss_fn(args).leaf();
    ++host_prints;
    host_saw = fmt::format("{} of {}", loss.is_traced() ? "a tracer" : "a value",
                           pe::type_to_string(loss.dtype(), loss.shape()));
    return pe::Tree(pe::debug_print("loss", loss));
  });
  constexpr int kCalls = 3;
  std::string printed;
  {
    const CapturedStderr captured;
    for (int call = 0; call < kCalls; ++call) step({params, pe::Tree(x), pe::Tree(y)});
    printed = captured.text();
  }
  const auto debug_lines = static_cast<double>(std::count(printed.begin(), printed.end(), '\n'));

  ProbeResult result;
  result.figures.set_text("numpy_error", numpy_error);
  result.figures.set_text("concrete_error", jax_quote(concrete_error));
  result.figures.set("calls", kCalls);
  result.figures.set("host_prints", host_prints);
  result.figures.set_text("host_print_saw", host_saw);
  result.figures.set("debug_print_lines", debug_lines);
  result.as_expected =
      numpy_error.rfind("The numpy.ndarray conversion method __array__() was called on traced "
                        "array",
                        0) == 0 &&
      concrete_error.rfind("Abstract tracer value encountered", 0) == 0 && host_prints == 1 &&
      debug_lines == kCalls;
  result.observed = fmt::format(
      "np.sin(x) inside jit: {}; a traced value used as a concrete one: {}; {} calls of a jitted "
      "step ran its host print {} time(s), at trace time, seeing {}, and printed {} line(s) "
      "with debug_print",
      numpy_error,
      concrete_error.substr(0, concrete_error.find(':')), kCalls, host_prints, host_saw,
      debug_lines);
  return result;
}

}  // namespace parity::engine_trainer
