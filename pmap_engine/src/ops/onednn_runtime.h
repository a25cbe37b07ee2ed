// What every oneDNN kernel of the engine shares: the CPU engine, a stream per calling thread,
// one OpenMP thread per call, and a cache of primitives keyed by their shapes and parameters.
//
// Debian's oneDNN 2.6.3 runs on OpenMP (dnnl_config.h: DNNL_CPU_RUNTIME is DNNL_RUNTIME_OMP). The
// engine's devices already use the cores, one thread each, and a primitive's reductions split
// by thread count (a kernel gradient summed in per-thread parts), so its results would depend on
// the host's core count as a threaded BLAS's would (ops/blas.h). Each call therefore creates and
// runs its primitive inside a OneDnnCall, which sets the calling thread's OpenMP team to one
// thread (libgomp keeps that setting per thread) and restores it after, so LibTorch, which
// shares the process in tests and benchmarks, keeps its own setting.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace pmap_engine {

// The process's oneDNN CPU engine.
const dnnl::engine& onednn_engine();

// Attributes of a primitive whose scratchpad the caller passes (OneDnnCall::scratchpad), so that
// device threads running one cached primitive at once never share one.
dnnl::primitive_attr user_scratchpad_attr();

// Scope of one oneDNN call on the calling thread: one OpenMP thread, and that thread's stream.
class OneDnnCall {
 public:
  OneDnnCall();
  ~OneDnnCall();
  OneDnnCall(const OneDnnCall&) = delete;
  OneDnnCall& operator=(const OneDnnCall&) = delete;

  dnnl::stream& stream();
  // The calling thread's scratchpad for a primitive whose scratchpad is `desc`, grown as needed
  // and aligned as oneDNN's own allocations are; valid until the thread's next call.
  dnnl::memory scratchpad(const dnnl::memory::desc& desc);

 private:
  int previous_threads_;
};

// Primitives (and whatever else a kernel derives from a shape) built once per key and shared by
// every device thread: oneDNN primitives are immutable once created and may run concurrently.
// `make` runs under the cache's lock, inside the caller's OneDnnCall.
template <typename Value>
class OneDnnCache {
 public:
  using Key = std::vector<int64_t>;

  const Value& get(const Key& key, const std::function<Value()>& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = values_.find(key);
    if (found == values_.end()) found = values_.emplace(key, make()).first;
    return found->second;
  }

 private:
  std::mutex mutex_;
  std::map<Key, Value> values_;
};

}  // namespace pmap_engine
