#include "parity/compare/tolerance.h"

#include <fmt/format.h>

#include <cmath>

namespace parity::compare {
namespace {

struct DtypeDefaults {
  const char* run_dtype;  // run.json spelling
  const char* torch_name;
  double rtol;
  double atol;
};

// torch/testing/_comparison.py, _DTYPE_PRECISIONS (see tolerance.h).
constexpr DtypeDefaults kAssertCloseDefaults[] = {
    {"f16", "float16", 1e-3, 1e-5},
    {"bf16", "bfloat16", 1.6e-2, 1e-5},
    {"f32", "float32", 1.3e-6, 1e-5},
    {"f64", "float64", 1e-7, 1e-7},
};

// Runs of up to this many compared steps get no bad steps (tolerance.h).
constexpr int64_t kStrictStepLimit = 100;
constexpr int64_t kStepsPerAllowedBadStep = 100;  // 1%

}  // namespace

bool is_close(double a, double b, double rtol, double atol) {
  if (std::isnan(a) || std::isnan(b)) return false;
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::abs(a - b) <= allowed_difference(b, rtol, atol);
}

double allowed_difference(double b, double rtol, double atol) { return atol + rtol * std::abs(b); }

std::optional<Tolerance> assert_close_tolerance(std::string_view dtype) {
  for (const DtypeDefaults& defaults : kAssertCloseDefaults) {
    if (dtype != defaults.run_dtype) continue;
    Tolerance tolerance;
    tolerance.rtol = defaults.rtol;
    tolerance.atol = defaults.atol;
    tolerance.source = fmt::format(
        "{} defaults of torch.testing.assert_close (torch/testing/_comparison.py): rtol {}, "
        "atol {}",
        defaults.torch_name, defaults.rtol, defaults.atol);
    return tolerance;
  }
  return std::nullopt;
}

Tolerance looser_of(const Tolerance& a, const Tolerance& b) {
  const bool b_looser = b.rtol > a.rtol || (b.rtol == a.rtol && b.atol > a.atol);
  return b_looser ? b : a;
}

int64_t default_allowed_bad_steps(int64_t num_compared_steps) {
  if (num_compared_steps <= kStrictStepLimit) return 0;
  return num_compared_steps / kStepsPerAllowedBadStep;
}

Tolerance default_tensor_tolerance() {
  Tolerance tolerance;
  tolerance.rtol = kTensorRtol;
  tolerance.atol = kTensorAtol;
  tolerance.source = fmt::format(
      "parity's tensor defaults (tolerance.h), measured on ddp_ref vs pmap_engine: rtol {}, "
      "atol {}",
      kTensorRtol, kTensorAtol);
  return tolerance;
}

}  // namespace parity::compare
