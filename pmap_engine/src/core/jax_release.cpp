#include "pmap_engine/jax_release.h"

#include "pmap_engine/dtype.h"

namespace pmap_engine {
namespace {

std::atomic<JaxRelease> in_effect{kDefaultJaxRelease};

}  // namespace

std::string to_string(JaxRelease release) {
  switch (release) {
    case JaxRelease::kV0_4_38:
      return "0.4.38";
    case JaxRelease::kV0_11_0:
      return "0.11.0";
  }
  throw std::logic_error("unknown JaxRelease");
}

const std::vector<std::string>& jax_release_names() {
  static const std::vector<std::string> names = {to_string(JaxRelease::kV0_11_0),
                                                 to_string(JaxRelease::kV0_4_38)};
  return names;
}

JaxRelease parse_jax_release(const std::string& text) {
  for (JaxRelease release : {JaxRelease::kV0_11_0, JaxRelease::kV0_4_38}) {
    if (to_string(release) == text) return release;
  }
  std::string accepted;
  for (const std::string& name : jax_release_names()) {
    accepted += (accepted.empty() ? "" : ", ") + name;
  }
  throw EngineError("unknown JAX release '" + text + "': the engine models " + accepted);
}

JaxRelease jax_release() { return in_effect.load(std::memory_order_acquire); }

ScopedJaxRelease::ScopedJaxRelease(JaxRelease release)
    : previous_(in_effect.exchange(release, std::memory_order_acq_rel)) {}

ScopedJaxRelease::~ScopedJaxRelease() { in_effect.store(previous_, std::memory_order_release); }

}  // namespace pmap_engine
