// The kernels' side of ReductionTraffic (pmap_engine/collectives.h): a reduction kernel reports
// each transfer between two devices' buffers as it makes it.
#pragma once

#include <cstddef>

namespace pmap_engine::ops {

// `bytes` went from the buffer of the device at position `from` on the reduced axis to that of
// position `to`. A no-op unless a ReductionTraffic is counting.
void record_reduction_transfer(size_t from, size_t to, size_t bytes);

}  // namespace pmap_engine::ops
