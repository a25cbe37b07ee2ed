// The JAX release the engine models, where two releases differ in an error text or a behaviour
// the catalogue touches. The default is the newest tag modelled, jax-v0.11.0; jax-v0.4.38, the
// last 0.4.x, is what the source documents' readers ran (pmap on pxla.py, not yet on
// shard_map). Each site that differs cites the file and function at both tags.
//
// Like a jax.config option, the release in effect is one process-wide setting: the engine
// traces on the calling thread and runs device work on worker threads, and both may read it.
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace pmap_engine {

enum class JaxRelease { kV0_4_38, kV0_11_0 };

inline constexpr JaxRelease kDefaultJaxRelease = JaxRelease::kV0_11_0;

// "0.4.38", "0.11.0".
std::string to_string(JaxRelease release);
// Every accepted spelling, newest first ("0.11.0", "0.4.38").
const std::vector<std::string>& jax_release_names();
// The release named by `text`; an EngineError listing the accepted names otherwise.
JaxRelease parse_jax_release(const std::string& text);

// The release in effect (kDefaultJaxRelease unless a ScopedJaxRelease is alive); safe from
// any thread.
JaxRelease jax_release();

// Sets the release in effect for its lifetime and restores the previous one. Set it around a
// whole run, before any worker starts: the setting is process-wide, not per thread.
class ScopedJaxRelease {
 public:
  explicit ScopedJaxRelease(JaxRelease release);
  ~ScopedJaxRelease();
  ScopedJaxRelease(const ScopedJaxRelease&) = delete;
  ScopedJaxRelease& operator=(const ScopedJaxRelease&) = delete;

 private:
  JaxRelease previous_;
};

}  // namespace pmap_engine
