#include "ops/onednn_runtime.h"

#include <omp.h>

#include <cstddef>
#include <memory>

namespace pmap_engine {

const dnnl::engine& onednn_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

OneDnnCall::OneDnnCall() : previous_threads_(omp_get_max_threads()) { omp_set_num_threads(1); }

OneDnnCall::~OneDnnCall() { omp_set_num_threads(previous_threads_); }

dnnl::stream& OneDnnCall::stream() {
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

dnnl::memory OneDnnCall::scratchpad(const dnnl::memory::desc& desc) {
  constexpr size_t kAlignment = 64;
  thread_local std::unique_ptr<std::byte[]> storage;
  thread_local size_t capacity = 0;
  const size_t bytes = desc.get_size();
  if (capacity < bytes) {
    storage = std::make_unique<std::byte[]>(bytes + kAlignment);
    capacity = bytes;
  }
  void* start = storage.get();
  size_t space = capacity + kAlignment;
  return dnnl::memory(desc, onednn_engine(), std::align(kAlignment, bytes, start, space));
}

}  // namespace pmap_engine
