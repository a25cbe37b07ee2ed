#include "ops/onednn_runtime.h"

#include <omp.h>

namespace pmap_engine {

const dnnl::engine& onednn_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

OneDnnCall::OneDnnCall() : previous_threads_(omp_get_max_threads()) { omp_set_num_threads(1); }

OneDnnCall::~OneDnnCall() { omp_set_num_threads(previous_threads_); }

dnnl::stream& OneDnnCall::stream() {
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

}  // namespace pmap_engine
