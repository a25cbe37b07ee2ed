// Collectives over a named mapped axis: the primitives psum, pmax, pmin, all_gather,
// reduce_scatter (psum_scatter's primitive, as JAX names it), ppermute and axis_index, and the
// public ops of pmap_engine/collectives.h. Semantics, params and transpose rules follow
// jax/_src/lax/parallel.py (jax-ml/jax at 006a6a63).
//
// Vocabulary.
//   axis          the mapped axis a pmap binds (ir/axis_env.h): a name and a size N.
//   device d      position d = 0..N-1 on the axis; per_device_inputs[d][i] is operand i as
//                 device d holds it, and a collective kernel returns outputs[d][o].
//   leaf          one operand of a variadic reduction: psum over a pytree binds one psum with
//                 one operand per leaf, as JAX's psum_p (multiple_results) does.
//   fold          combining the devices' values of one element in *device order*:
//                   acc = x_0[e]; acc = acc (+) x_1[e]; ...; acc = acc (+) x_{N-1}[e]
//                 in the element's compute type (f32 for f32/bf16/f16, so half types round once
//                 at the end; f64; 32-bit wrapping for integers). A fixed order makes the sum
//                 independent of threads and timing: bitwise identical on every run.
//   replicate     every device receives its own copy of a reduced buffer (same bits): the
//                 executor may overwrite a device's dying buffer in place, so devices never
//                 share storage. The reductions write every device's copy straight from the
//                 folded chunk (see "Reductions" below); all_gather copies its result.
//   block         all_gather and reduce_scatter see a shape as [outer, N * K, inner] around
//                 their dimension (split_at_axis): block r is the K rows r*K .. r*K+K-1, which
//                 device r contributes (all_gather) or keeps (reduce_scatter). Untiled, K = 1
//                 and the dimension exists only on the stacked side.
//
// Params, printed like a jaxpr: every primitive carries "axis_name" (the string) and
// "axis_size" (N), which the executor reads; the reductions also print JAX's
// axes=('data',), and ppermute its perm=((0, 1), (1, 0)).
//
// Transposes (reverse mode), jax/_src/lax/parallel.py at jax-v0.11.0. Under pmap
// (check_vma=False):
//   psum          _psum_transpose_rule: the cotangents are psum'd again ("we treat psum as
//                 psum + pbroadcast"): grad of a psum'd loss is N times the per-device grad
//                 (pitfall P3). pmean is psum then a division, so it transposes to pmean.
// Under shard_map(check_vma=True), where values carry the axes they vary along
// (ir/varying_axes.h), psum binds psum_invariant (_psum: "if config._check_vma.value:
// bind_psum_invariant"), and pvary appears wherever an invariant value meets a varying one:
//   psum_invariant  _psum_invariant_transpose_rule: pvary, a no-op on values: the gradient of
//                 a psum'd loss is the local gradient. pmean transposes to a division.
//   pvary         _pvary_transpose_rule: psum_invariant: the cotangents of a replicated value
//                 used by every device are summed over the devices.
// The rules below hold under both:
//   all_gather    _all_gather_transpose_rule: psum_scatter over the gathered dimension.
//   reduce_scatter _reduce_scatter_transpose_rule: all_gather at the scattered dimension.
//   ppermute      _ppermute_transpose_rule: ppermute with (destination, source) pairs.
//   pmax, pmin    no ad rule is registered in JAX ("Differentiation rule for 'pmax' not
//                 implemented"): we raise the same way.
//   axis_index    integer output: not differentiable.
#include "pmap_engine/collectives.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "ir/axis_env.h"
#include "ir/primitive.h"
#include "ir/trace.h"
#include "ir/varying_axes.h"
#include "ops/kernel_util.h"
#include "ops/reduction_traffic.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

using ir::AbstractValue;
using ir::Params;
using DeviceInputs = std::vector<std::vector<const Buffer*>>;
using DeviceOutputs = std::vector<std::vector<Buffer>>;
using Vjp = std::function<std::vector<Array>(const ir::VjpArgs&)>;

// ---------------------------------------------------------------------------------------------
// Params
// ---------------------------------------------------------------------------------------------

// An axis as the public op saw it when it bound the primitive (a copy: find_axis returns a
// reference into the thread's stack of bound axes).
struct AxisInfo {
  std::string name;
  int64_t num_devices = 0;
};

AxisInfo lookup_axis(const std::string& axis_name, const char* op) {
  const ir::AxisFrame& frame = ir::find_axis(axis_name, op);
  return {frame.name, frame.size};
}

AxisInfo axis_of(const Params& params) {
  return {params.text("axis_name"), params.integer("axis_size")};
}

Params reduction_params(const AxisInfo& axis) {
  return {{"axes", ir::axes_tuple_text({axis.name})},
          {"axis_name", axis.name},
          {"axis_size", axis.num_devices}};
}

Params gather_params(const AxisInfo& axis, int64_t dimension, bool tiled) {
  return {{"all_gather_dimension", dimension},
          {"axis_name", axis.name},
          {"axis_size", axis.num_devices},
          {"tiled", tiled}};
}

Params scatter_params(const AxisInfo& axis, int64_t dimension, bool tiled) {
  return {{"axis_name", axis.name},
          {"axis_size", axis.num_devices},
          {"scatter_dimension", dimension},
          {"tiled", tiled}};
}

using Perm = std::vector<std::pair<int64_t, int64_t>>;

// ((0, 1), (1, 2)) as JAX prints ppermute's perm; ((0, 1),) for one pair.
std::string perm_text(const Perm& perm) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < perm.size(); ++i) {
    out << (i ? ", " : "") << "(" << perm[i].first << ", " << perm[i].second << ")";
  }
  out << (perm.size() == 1 ? ",)" : ")");
  return out.str();
}

// The inverse of perm_text: the integers in order, paired up.
Perm parse_perm(const std::string& text) {
  std::vector<int64_t> numbers;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '-' || std::isdigit(static_cast<unsigned char>(text[i]))) {
      size_t used = 0;
      numbers.push_back(std::stoll(text.substr(i), &used));
      i += used;
    } else {
      ++i;
    }
  }
  Perm perm;
  for (size_t i = 0; i + 1 < numbers.size(); i += 2) perm.emplace_back(numbers[i], numbers[i + 1]);
  return perm;
}

Params permute_params(const AxisInfo& axis, const Perm& perm) {
  return {{"axis_name", axis.name}, {"axis_size", axis.num_devices}, {"perm", perm_text(perm)}};
}

Params index_params(const AxisInfo& axis) {
  return {{"axis_name", axis.name}, {"axis_size", axis.num_devices}};
}

// ---------------------------------------------------------------------------------------------
// Kernel helpers
// ---------------------------------------------------------------------------------------------

// Invariant of the executor: one program, so every device holds the same operand types.
void check_device_inputs(const char* op, const DeviceInputs& inputs, const Params& params) {
  const int64_t num_devices = params.integer("axis_size");
  if (static_cast<int64_t>(inputs.size()) != num_devices) {
    throw std::logic_error(std::string(op) + ": collective kernel got " +
                           std::to_string(inputs.size()) + " devices, axis_size is " +
                           std::to_string(num_devices));
  }
  for (const auto& device : inputs) {
    if (device.size() != inputs.front().size()) {
      throw std::logic_error(std::string(op) + ": devices hold different operand counts");
    }
    for (size_t i = 0; i < device.size(); ++i) {
      if (device[i]->dtype != inputs.front()[i]->dtype ||
          device[i]->shape != inputs.front()[i]->shape) {
        throw std::logic_error(std::string(op) + ": operand " + std::to_string(i) +
                               " differs between devices: " +
                               type_to_string(inputs.front()[i]->dtype, inputs.front()[i]->shape) +
                               " vs " + type_to_string(device[i]->dtype, device[i]->shape));
      }
    }
  }
}

Buffer copy_of(const Buffer& source) {
  Buffer copy = Buffer::allocate_uninitialized(source.dtype, source.shape);
  if (source.num_bytes() > 0)
    std::memcpy(copy.bytes->data(), source.bytes->data(), source.num_bytes());
  return copy;
}

// outputs[d] = one copy of `results` per device.
DeviceOutputs replicate(const std::vector<Buffer>& results, size_t num_devices) {
  DeviceOutputs outputs(num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    for (const auto& result : results) outputs[d].push_back(d == 0 ? result : copy_of(result));
  }
  return outputs;
}

// Integer sums wrap modulo 2^32, as XLA's do (no signed-overflow UB).
template <typename Compute>
Compute fold_add(Compute acc, Compute value) {
  if constexpr (std::is_integral_v<Compute>) {
    return static_cast<Compute>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(value));
  } else {
    return acc + value;
  }
}

// lax.max / lax.min propagate NaN (XLA's semantics).
template <typename Compute>
Compute fold_max(Compute acc, Compute value) {
  if constexpr (std::is_floating_point_v<Compute>) {
    if (std::isnan(acc) || std::isnan(value)) return std::isnan(acc) ? acc : value;
  }
  return value > acc ? value : acc;
}
template <typename Compute>
Compute fold_min(Compute acc, Compute value) {
  if constexpr (std::is_floating_point_v<Compute>) {
    if (std::isnan(acc) || std::isnan(value)) return std::isnan(acc) ? acc : value;
  }
  return value < acc ? value : acc;
}

enum class Fold { kSum, kMax, kMin };

// ---------------------------------------------------------------------------------------------
// Reductions (psum, pmax, pmin)
// ---------------------------------------------------------------------------------------------
//
// Each element is folded in device order in its compute type, exactly as
//   acc = load(x_0[e]); acc = acc (+) load(x_1[e]); ...; out_d[e] = store(acc) for every d,
// so the bits do not depend on how the elements are scheduled. Only the schedule is tuned,
// for memory traffic: N devices of S bytes must read N*S and write N*S (one copy per device).
//   chunks     the elements go in chunks of kChunkBytes of accumulator (L1/L2-resident): a
//              chunk loads device 0, folds devices 1..N-1 in (four per pass over the chunk),
//              and is copied to every other device's output while still in cache. The earlier
//              schedule (N-1 whole-buffer passes over the result, then N-1 memcpys) moved about
//              (5N-3)*S bytes through memory instead of 2N*S.
//   threads    from kParallelBytes of input (all devices together), the element range is cut
//              on chunk boundaries among up to kMaxWorkers threads (a thread costs tens of us
//              to start: below that it does not pay); each element is folded by one thread.
//   streaming  above kStreamingBytes of output, the copies are written with non-temporal
//              stores: they cannot stay in cache anyway, and this skips reading every
//              destination line before writing it.
//   recycled   outputs of at least kMinRecycledBytes come from OutputStorageCache: storage of
//   storage    earlier outputs, kept when they die (up to the bytes of the largest call, at
//              most kMaxRecycledBytes) for the next reduction of the same size. Fresh memory
//              that large comes from mmap or a trimmed heap, and its first-touch page faults
//              (about 2 us per 4 KiB page on a VM) cost more than the fold: before this cache a
//              psum of 8 x 64 MiB spent about 3/4 of its time faulting in its outputs. A step
//              that psums the same gradients every call reuses the same storage. The cached
//              bytes are dead storage, like malloc's free lists: no device's live or peak
//              bytes count them (runtime/device_run.h counts live buffers only).
//   huge pages new storage of at least kHugePageAdviceBytes is advised MADV_HUGEPAGE before it
//              is first written (2 MiB pages: far fewer faults). A hint only.
// Not done: one storage shared by all devices (S written instead of N*S: (N-1)*S less of the
// 2N*S moved, though only about 10-15% faster at 8 x 64 MiB in a standalone test, as reading
// the inputs dominates). device_run.cpp does refuse in-place writes and pooling of storage with
// use_count() > 1, but devices run those checks concurrently on the executor's workers, where
// use_count() is a relaxed read that orders nothing against another device's last read of the
// data; and every device's peak bytes would still count the storage. So the collectives keep
// the executor's invariant that devices never share a result (collectives_test checks it).
constexpr size_t kChunkBytes = 32 << 10;
constexpr size_t kParallelBytes = 4 << 20;
constexpr size_t kMinBytesPerWorker = 512 << 10;
constexpr size_t kMaxWorkers = 8;
constexpr size_t kStreamingBytes = 16 << 20;
constexpr size_t kMinRecycledBytes = 64 << 10;
constexpr size_t kMaxRecycledBytes = size_t{512} << 20;
constexpr size_t kHugePageAdviceBytes = 4 << 20;

void advise_huge_pages(ByteStorage& storage) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const size_t num_bytes = storage.size();
  if (num_bytes < kHugePageAdviceBytes) return;
  const auto begin = reinterpret_cast<uintptr_t>(storage.data());
  const uintptr_t page = 4096;
  const uintptr_t first = (begin + page - 1) & ~(page - 1);
  const uintptr_t last = (begin + num_bytes) & ~(page - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)storage;
#endif
}

// Storage of dead reduction outputs, by size, for the next reduction (see "recycled storage").
// Thread-safe: outputs die on whichever thread releases them last.
class OutputStorageCache {
 public:
  // Never destroyed: outputs may die during static destruction, and their deleter comes here.
  static OutputStorageCache& instance() {
    static OutputStorageCache* cache = new OutputStorageCache();
    return *cache;
  }

  // Storage of `num_bytes` (contents undefined) for one output of a call that writes
  // `call_bytes` in all.
  std::shared_ptr<ByteStorage> take(size_t num_bytes, size_t call_bytes) {
    std::unique_ptr<ByteStorage> storage;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      limit_ = std::max(limit_, std::min(call_bytes, kMaxRecycledBytes));
      auto found = free_.find(num_bytes);
      if (found != free_.end()) {
        storage = std::move(found->second);
        free_.erase(found);
        cached_bytes_ -= num_bytes;
      }
    }
    if (!storage) {
      storage = std::make_unique<ByteStorage>(num_bytes);  // uninitialised, not yet touched
      advise_huge_pages(*storage);
    }
    return std::shared_ptr<ByteStorage>(storage.release(),
                                        [](ByteStorage* dead) { instance().give(dead); });
  }

 private:
  void give(ByteStorage* dead) {
    std::unique_ptr<ByteStorage> storage(dead);
    const size_t num_bytes = storage->size();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_bytes_ + num_bytes <= limit_) {
        cached_bytes_ += num_bytes;
        free_.emplace(num_bytes, std::move(storage));
      }
    }
    // Over the limit: `storage` is freed here, as usual, outside the lock.
  }

  std::mutex mutex_;
  std::multimap<size_t, std::unique_ptr<ByteStorage>> free_;
  size_t cached_bytes_ = 0;
  size_t limit_ = 0;
};

// One device's output shaped like `like`, every element to be written by the caller;
// `call_bytes`: what the whole reduction writes (every leaf, every device).
Buffer reduction_output(const Buffer& like, size_t call_bytes) {
  if (like.num_bytes() < kMinRecycledBytes) {
    return Buffer::allocate_uninitialized(like.dtype, like.shape);
  }
  Buffer buffer;
  buffer.dtype = like.dtype;
  buffer.shape = like.shape;
  buffer.bytes = OutputStorageCache::instance().take(like.num_bytes(), call_bytes);
  return buffer;
}

// dst[0, num_bytes) = src[0, num_bytes); non-temporal stores when `streaming` and aligned.
void write_chunk(std::byte* dst, const std::byte* src, size_t num_bytes, bool streaming) {
#if defined(__SSE2__)
  if (streaming && num_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    auto* to = reinterpret_cast<__m128i*>(dst);
    const auto* from = reinterpret_cast<const __m128i*>(src);
    for (size_t i = 0; i < num_bytes / 16; ++i) _mm_stream_si128(to + i, _mm_load_si128(from + i));
    return;
  }
#endif
  (void)streaming;
  std::memcpy(dst, src, num_bytes);
}

// Orders the non-temporal stores before whatever the caller does next (another thread reads
// the outputs once this range's worker has been joined).
void end_streaming() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

template <Fold kFold, typename Compute>
Compute fold_step(Compute acc, Compute value) {
  if constexpr (kFold == Fold::kSum) {
    if constexpr (std::is_same_v<Compute, bool>)
      return acc || value;  // refused upstream
    else
      return fold_add(acc, value);
  } else if constexpr (kFold == Fold::kMax) {
    return fold_max(acc, value);
  } else {
    return fold_min(acc, value);
  }
}

// Operand `leaf` of every device, elements [begin, end), folded in device order and written to
// every device's output. x_d: [...] -> out_d: [...]. Device 0's output chunk is the
// accumulator when the compute type is the storage type (f32, f64, i32, u32; measured faster
// than a separate accumulator), else it receives the rounded values; either way the other
// devices' chunks are copied from it while it is in cache.
template <typename Element, Fold kFold>
void fold_range(const DeviceInputs& inputs, size_t leaf, std::vector<Buffer>& outputs,
                size_t begin, size_t end, bool streaming) {
  using Storage = typename Element::Storage;
  using Compute = typename Element::Compute;
  constexpr size_t kChunk = kChunkBytes / sizeof(Compute);
  constexpr bool kStoresAsComputed = std::is_same_v<Storage, Compute>;
  // The accumulator when the compute type differs (bf16/f16 in f32, bool).
  alignas(64) std::array<Compute, kStoresAsComputed ? 1 : kChunk> separate;
  const size_t num_devices = inputs.size();
  for (size_t chunk = begin; chunk < end; chunk += kChunk) {
    const size_t count = std::min(kChunk, end - chunk);
    Storage* first = outputs[0].template data<Storage>() + chunk;
    Compute* acc = nullptr;
    const Storage* x0 = inputs[0][leaf]->template data<Storage>() + chunk;
    if constexpr (kStoresAsComputed) {
      acc = first;
      std::memcpy(acc, x0, count * sizeof(Storage));
    } else {
      acc = separate.data();
      for (size_t e = 0; e < count; ++e) acc[e] = Element::load(x0[e]);
    }
    size_t d = 1;
    for (; d + 3 < num_devices; d += 4) {  // ((acc (+) x_d) (+) x_d+1) (+) ..., one pass
      const Storage* x1 = inputs[d][leaf]->template data<Storage>() + chunk;
      const Storage* x2 = inputs[d + 1][leaf]->template data<Storage>() + chunk;
      const Storage* x3 = inputs[d + 2][leaf]->template data<Storage>() + chunk;
      const Storage* x4 = inputs[d + 3][leaf]->template data<Storage>() + chunk;
      for (size_t e = 0; e < count; ++e) {
        Compute value = fold_step<kFold>(acc[e], Element::load(x1[e]));
        value = fold_step<kFold>(value, Element::load(x2[e]));
        value = fold_step<kFold>(value, Element::load(x3[e]));
        acc[e] = fold_step<kFold>(value, Element::load(x4[e]));
      }
    }
    for (; d < num_devices; ++d) {
      const Storage* x = inputs[d][leaf]->template data<Storage>() + chunk;
      for (size_t e = 0; e < count; ++e) acc[e] = fold_step<kFold>(acc[e], Element::load(x[e]));
    }
    if constexpr (!kStoresAsComputed) {
      for (size_t e = 0; e < count; ++e) first[e] = Element::store(acc[e]);
    }
    for (size_t o = 1; o < outputs.size(); ++o) {
      write_chunk(reinterpret_cast<std::byte*>(outputs[o].template data<Storage>() + chunk),
                  reinterpret_cast<const std::byte*>(first), count * sizeof(Storage), streaming);
    }
  }
  if (streaming) end_streaming();
  // What the chunks moved between devices (ReductionTraffic): each other device's elements
  // into device 0's chunk, then device 0's chunk out to each other device. The accumulator of
  // a 16-bit type is this thread's, standing in for device 0's output it is stored into.
  const size_t range_bytes = (end - begin) * sizeof(Storage);
  for (size_t d = 1; d < num_devices; ++d) {
    ops::record_reduction_transfer(d, 0, range_bytes);
    ops::record_reduction_transfer(0, d, range_bytes);
  }
}

// Runs range(begin, end) over [0, num_elements) cut on multiples of `grain`: on this thread
// alone below kParallelBytes of input, else on up to kMaxWorkers threads (this one included).
void for_ranges(size_t num_elements, size_t grain, size_t input_bytes,
                const std::function<void(size_t, size_t)>& range) {
  size_t workers = 1;
  if (input_bytes >= kParallelBytes) {
    const size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency());
    workers = std::min({cores, kMaxWorkers, input_bytes / kMinBytesPerWorker,
                        (num_elements + grain - 1) / grain});
  }
  if (workers <= 1) {
    range(0, num_elements);
    return;
  }
  const size_t num_grains = (num_elements + grain - 1) / grain;
  std::vector<size_t> bounds(workers + 1, num_elements);
  for (size_t w = 0; w < workers; ++w) {
    bounds[w] = std::min(num_elements, num_grains * w / workers * grain);
  }
  std::vector<std::thread> threads;
  size_t next = 1;
  try {
    for (; next < workers; ++next) threads.emplace_back(range, bounds[next], bounds[next + 1]);
  } catch (const std::system_error&) {
    // No thread to be had: this thread does the remaining ranges too.
  }
  range(bounds[0], bounds[1]);
  for (size_t w = next; w < workers; ++w) range(bounds[w], bounds[w + 1]);
  for (auto& thread : threads) thread.join();
}

// Operand `leaf` of every device folded in device order: one output per device.
template <typename Element, Fold kFold>
std::vector<Buffer> fold_devices(const DeviceInputs& inputs, size_t leaf, size_t call_bytes) {
  const Buffer& first = *inputs.front()[leaf];
  std::vector<Buffer> outputs;
  outputs.reserve(inputs.size());
  for (size_t d = 0; d < inputs.size(); ++d) outputs.push_back(reduction_output(first, call_bytes));
  const size_t num_elements = first.num_elements();
  if (num_elements == 0) return outputs;
  const size_t device_bytes = first.num_bytes();
  const bool streaming = device_bytes * inputs.size() >= kStreamingBytes;
  for_ranges(num_elements, kChunkBytes / sizeof(typename Element::Compute),
             device_bytes * inputs.size(), [&](size_t begin, size_t end) {
               fold_range<Element, kFold>(inputs, leaf, outputs, begin, end, streaming);
             });
  return outputs;
}

DeviceOutputs reduction_kernel(const char* op, Fold fold, const DeviceInputs& inputs,
                               const Params& params) {
  check_device_inputs(op, inputs, params);
  DeviceOutputs outputs(inputs.size());
  if (inputs.empty()) return outputs;
  size_t call_bytes = 0;
  for (const Buffer* operand : inputs.front()) call_bytes += operand->num_bytes() * inputs.size();
  for (size_t leaf = 0; leaf < inputs.front().size(); ++leaf) {
    std::vector<Buffer> results = dispatch_all(inputs.front()[leaf]->dtype, [&](auto element) {
      using Element = decltype(element);
      switch (fold) {
        case Fold::kSum:
          return fold_devices<Element, Fold::kSum>(inputs, leaf, call_bytes);
        case Fold::kMax:
          return fold_devices<Element, Fold::kMax>(inputs, leaf, call_bytes);
        case Fold::kMin:
          break;
      }
      return fold_devices<Element, Fold::kMin>(inputs, leaf, call_bytes);
    });
    for (size_t d = 0; d < inputs.size(); ++d) outputs[d].push_back(std::move(results[d]));
  }
  return outputs;
}

// Output shape of all_gather: x with N inserted at `dimension` (untiled) or shape[dimension]*N.
Shape gathered_shape(const Shape& shape, int64_t dimension, int64_t num_devices, bool tiled) {
  Shape out = shape;
  if (tiled)
    out[static_cast<size_t>(dimension)] *= num_devices;
  else
    out.insert(out.begin() + dimension, num_devices);
  return out;
}

// Output shape of reduce_scatter: shape[dimension]/N (tiled) or the dimension removed.
Shape scattered_shape(const Shape& shape, int64_t dimension, int64_t num_devices, bool tiled) {
  Shape out = shape;
  if (tiled)
    out[static_cast<size_t>(dimension)] /= num_devices;
  else
    out.erase(out.begin() + dimension);
  return out;
}

// all_gather: out [outer, N*K, inner]; block d along the dimension is device d's x [outer, K,
// inner]. Every device gets the same gathered buffer.
DeviceOutputs all_gather_kernel(const DeviceInputs& inputs, const Params& params) {
  check_device_inputs("all_gather", inputs, params);
  const size_t num_devices = inputs.size();
  const Buffer& first = *inputs.front()[0];
  const int64_t dimension = params.integer("all_gather_dimension");
  Buffer out = Buffer::allocate(
      first.dtype, gathered_shape(first.shape, dimension, static_cast<int64_t>(num_devices),
                                  params.flag("tiled")));
  if (out.num_elements() > 0) {
    const AxisSplit split = split_at_axis(out.shape, dimension);
    const size_t block_rows = split.axis_size / num_devices;  // K
    const size_t block_num_bytes = block_rows * split.num_inner * dtype_num_bytes(first.dtype);
    for (size_t outer = 0; outer < split.num_outer; ++outer) {
      for (size_t d = 0; d < num_devices; ++d) {
        std::memcpy(out.bytes->data() +
                        split.offset(outer, d * block_rows, 0) * dtype_num_bytes(first.dtype),
                    inputs[d][0]->bytes->data() + outer * block_num_bytes, block_num_bytes);
      }
    }
  }
  return replicate({out}, num_devices);
}

// reduce_scatter on device r: out[o, j, i] = fold over d of x_d[o, r*K + j, i], x: [outer,
// N*K, inner], out: [outer, K, inner] (the dimension squeezed away when untiled).
template <typename Element>
Buffer scatter_block(const DeviceInputs& inputs, const Params& params, size_t block) {
  using Storage = typename Element::Storage;
  const size_t num_devices = inputs.size();
  const Buffer& first = *inputs.front()[0];
  const int64_t dimension = params.integer("scatter_dimension");
  Buffer out = Buffer::allocate(
      first.dtype, scattered_shape(first.shape, dimension, static_cast<int64_t>(num_devices),
                                   params.flag("tiled")));
  if (out.num_elements() == 0) return out;
  const AxisSplit split = split_at_axis(first.shape, dimension);
  const size_t block_rows = split.axis_size / num_devices;  // K
  Storage* result = out.data<Storage>();
  size_t next = 0;  // out is [outer, K, inner] row-major
  for (size_t outer = 0; outer < split.num_outer; ++outer) {
    for (size_t row = 0; row < block_rows; ++row) {
      for (size_t inner = 0; inner < split.num_inner; ++inner) {
        const size_t at = split.offset(outer, block * block_rows + row, inner);
        auto acc = Element::load(first.data<Storage>()[at]);
        for (size_t d = 1; d < num_devices; ++d) {
          acc = fold_add(acc, Element::load(inputs[d][0]->data<Storage>()[at]));
        }
        result[next++] = Element::store(acc);
      }
    }
  }
  return out;
}

DeviceOutputs reduce_scatter_kernel(const DeviceInputs& inputs, const Params& params) {
  check_device_inputs("reduce_scatter", inputs, params);
  DeviceOutputs outputs(inputs.size());
  for (size_t r = 0; r < inputs.size(); ++r) {
    outputs[r].push_back(dispatch_numeric(inputs.front()[0]->dtype, [&](auto element) {
      return scatter_block<decltype(element)>(inputs, params, r);
    }));
  }
  return outputs;
}

// ppermute: out_dst = x_src for each pair; a device no pair sends to gets zeros.
DeviceOutputs ppermute_kernel(const DeviceInputs& inputs, const Params& params) {
  check_device_inputs("ppermute", inputs, params);
  const Buffer& first = *inputs.front()[0];
  DeviceOutputs outputs(inputs.size());
  for (auto& device : outputs) device.push_back(Buffer::allocate(first.dtype, first.shape));
  for (const auto& [source, destination] : parse_perm(params.text("perm"))) {
    outputs[static_cast<size_t>(destination)][0] = copy_of(*inputs[static_cast<size_t>(source)][0]);
  }
  return outputs;
}

DeviceOutputs axis_index_kernel(const DeviceInputs& inputs, const Params& params) {
  check_device_inputs("axis_index", inputs, params);
  DeviceOutputs outputs(inputs.size());
  for (size_t d = 0; d < inputs.size(); ++d) {
    Buffer index = Buffer::allocate(DType::i32, {});
    index.data<int32_t>()[0] = static_cast<int32_t>(d);
    outputs[d].push_back(std::move(index));
  }
  return outputs;
}

// ---------------------------------------------------------------------------------------------
// Abstract evaluation
// ---------------------------------------------------------------------------------------------

std::string operand_type(const AbstractValue& x) { return type_to_string(x.dtype, x.shape); }

void expect_operands(const char* op, const std::vector<AbstractValue>& inputs, size_t count) {
  if (inputs.size() != count) {
    throw EngineError(std::string(op) + ": expected " + std::to_string(count) +
                      " operand(s), got " + std::to_string(inputs.size()));
  }
}

std::vector<AbstractValue> reduction_abstract_eval(const char* op, bool allow_bool,
                                                   const std::vector<AbstractValue>& inputs) {
  for (const auto& x : inputs) {
    if (x.dtype == DType::bool_ && !allow_bool) {
      throw EngineError(std::string(op) + ": operand must be numeric, got " + operand_type(x) +
                        " (psum converts bool to i32 first; call psum, not the primitive)");
    }
  }
  return inputs;
}

std::vector<AbstractValue> all_gather_abstract_eval(const std::vector<AbstractValue>& inputs,
                                                    const Params& params) {
  expect_operands("all_gather", inputs, 1);
  const AbstractValue& x = inputs[0];
  const int64_t dimension = params.integer("all_gather_dimension");
  const bool tiled = params.flag("tiled");
  const int64_t num_dims = static_cast<int64_t>(x.shape.size()) + (tiled ? 0 : 1);
  if (dimension < 0 || dimension >= num_dims) {
    throw EngineError("all_gather: axis " + std::to_string(dimension) + " is out of bounds for " +
                      (tiled ? "a tiled gather of " : "stacking ") + operand_type(x) +
                      " (valid: 0 to " + std::to_string(num_dims - 1) + ")");
  }
  return {{x.dtype, gathered_shape(x.shape, dimension, params.integer("axis_size"), tiled)}};
}

std::vector<AbstractValue> reduce_scatter_abstract_eval(const std::vector<AbstractValue>& inputs,
                                                        const Params& params) {
  expect_operands("psum_scatter", inputs, 1);
  const AbstractValue& x = inputs[0];
  if (x.dtype == DType::bool_) {
    throw EngineError("psum_scatter: operand must be numeric, got " + operand_type(x));
  }
  const int64_t dimension = params.integer("scatter_dimension");
  const int64_t num_devices = params.integer("axis_size");
  const std::string axis =
      "'" + params.text("axis_name") + "' (" + std::to_string(num_devices) + " devices)";
  if (dimension < 0 || dimension >= static_cast<int64_t>(x.shape.size())) {
    throw EngineError("psum_scatter: scatter_dimension " + std::to_string(dimension) +
                      " is out of bounds for " + operand_type(x));
  }
  const int64_t extent = x.shape[static_cast<size_t>(dimension)];
  // jax/_src/lax/parallel.py _reduce_scatter_effectful_abstract_eval's ValueErrors.
  if (params.flag("tiled") && extent % num_devices != 0) {
    throw EngineError("psum_scatter: tiled reduce_scatter operand scatter dimension size " +
                      std::to_string(extent) + " must be divisible by shard_count " +
                      std::to_string(num_devices) + " of axis " + axis + "; operand " +
                      operand_type(x));
  }
  if (!params.flag("tiled") && extent != num_devices) {
    throw EngineError("psum_scatter: reduce_scatter operand scatter dimension size " +
                      std::to_string(extent) + " must match shard count " +
                      std::to_string(num_devices) + " of axis " + axis + "; operand " +
                      operand_type(x) + " (use tiled=true to split a dimension into blocks)");
  }
  return {{x.dtype, scattered_shape(x.shape, dimension, num_devices, params.flag("tiled"))}};
}

// JAX's _ppermute_lowering: "ppermute sources and destinations must be unique, got {perm}".
void check_perm(const Perm& perm, int64_t num_devices) {
  std::set<int64_t> sources;
  std::set<int64_t> destinations;
  for (const auto& [source, destination] : perm) {
    if (source < 0 || source >= num_devices || destination < 0 || destination >= num_devices) {
      throw EngineError("ppermute: perm " + perm_text(perm) +
                        " names an index outside the axis "
                        "of " +
                        std::to_string(num_devices) + " devices (valid: 0 to " +
                        std::to_string(num_devices - 1) + ")");
    }
    if (!sources.insert(source).second || !destinations.insert(destination).second) {
      throw EngineError("ppermute: ppermute sources and destinations must be unique, got " +
                        perm_text(perm));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Binding
// ---------------------------------------------------------------------------------------------

// Collectives have no single-device kernel: they are recorded into the mapped function's trace
// and run by the mapped executor. Without a trace (an axis bound but nothing tracing) there is
// nobody to run them with.
std::vector<Array> bind_collective(const ir::Primitive& primitive, const std::vector<Array>& inputs,
                                   const Params& params) {
  if (ir::TraceContext::current() == nullptr) {
    throw EngineError(primitive.name + ": collectives over axis '" + params.text("axis_name") +
                      "' run only inside a function traced by pmap (no active trace)");
  }
  return ir::bind(primitive, inputs, params);
}

// ---------------------------------------------------------------------------------------------
// Primitives
// ---------------------------------------------------------------------------------------------

const ir::Primitive* kPsum = nullptr;
const ir::Primitive* kPsumInvariant = nullptr;
const ir::Primitive* kAllGather = nullptr;
const ir::Primitive* kReduceScatter = nullptr;
const ir::Primitive* kPpermute = nullptr;

// psum transpose (_psum_transpose_rule): one psum over every cotangent that is wanted.
// ct_i: like x_i -> ct_i summed over devices.
std::vector<Array> psum_vjp(const ir::VjpArgs& args) {
  std::vector<Array> cotangents(args.inputs.size());
  std::vector<size_t> which;
  std::vector<Array> summed;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (args.needs(i) && args.output_cotangents[i].valid()) {
      which.push_back(i);
      summed.push_back(args.output_cotangents[i]);
    }
  }
  if (summed.empty()) return cotangents;
  std::vector<Array> reduced = bind_collective(*kPsum, summed, args.params);
  for (size_t k = 0; k < which.size(); ++k) cotangents[which[k]] = reduced[k];
  return cotangents;
}

// psum_invariant transpose (_psum_invariant_transpose_rule): pvary along the axis, a no-op on
// values. ct_i: like x_i, invariant -> ct_i, varying.
std::vector<Array> psum_invariant_vjp(const ir::VjpArgs& args) {
  std::vector<Array> cotangents(args.inputs.size());
  const ir::VaryingAxes axis = {args.params.text("axis_name")};
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (args.needs(i) && args.output_cotangents[i].valid()) {
      cotangents[i] = ir::vary(args.output_cotangents[i], axis);
    }
  }
  return cotangents;
}

// pvary transpose (_pvary_transpose_rule): psum_invariant over its axes, one axis at a time
// (the engine's reductions take one axis; JAX binds one psum_invariant over the tuple).
// ct: like x, varying -> summed over the devices of each axis.
std::vector<Array> pvary_vjp(const ir::VjpArgs& args) {
  Array cotangent = args.output_cotangents[0];
  for (const std::string& axis : ir::axes_in_tuple(args.params.text("axes"))) {
    cotangent = bind_collective(*kPsumInvariant, {cotangent},
                                reduction_params(lookup_axis(axis, "pvary transpose")))
                    .front();
  }
  return {cotangent};
}

// pmax_p / pmin_p register no JVP or transpose in jax/_src/lax/parallel.py, so JAX raises
// NotImplementedError("Differentiation rule for 'pmax' not implemented"), the same text at both
// tags (jax-v0.4.38 and jax-v0.11.0 jax/_src/interpreters/ad.py JVPTrace.process_primitive).
Vjp no_differentiation_rule(const std::string& name) {
  return [name](const ir::VjpArgs&) -> std::vector<Array> {
    throw EngineError("Differentiation rule for '" + name +
                      "' not implemented (JAX defines none either). Apply " + name +
                      " to a stop_gradient'ed value, or outside the differentiated function.");
  };
}

const ir::Primitive* register_reduction(const std::string& name, Fold fold, bool allow_bool,
                                        Vjp vjp) {
  ir::Primitive primitive;
  primitive.name = name;
  primitive.abstract_eval = [name, allow_bool](const std::vector<AbstractValue>& inputs,
                                               const Params&) {
    return reduction_abstract_eval(name.c_str(), allow_bool, inputs);
  };
  primitive.vjp = std::move(vjp);
  primitive.collective_kernel = [name, fold](const DeviceInputs& inputs, const Params& params) {
    return reduction_kernel(name.c_str(), fold, inputs, params);
  };
  return ir::register_primitive(std::move(primitive));
}

// all_gather transpose (_all_gather_transpose_rule): psum_scatter at the gathered dimension.
// ct: [gathered shape] -> [x's shape]
std::vector<Array> all_gather_vjp(const ir::VjpArgs& args) {
  const Params& params = args.params;
  return bind_collective(*kReduceScatter, {args.output_cotangents[0]},
                         scatter_params(axis_of(params), params.integer("all_gather_dimension"),
                                        params.flag("tiled")));
}

// reduce_scatter transpose (_reduce_scatter_transpose_rule): all_gather at the dimension.
// ct: [scattered shape] -> [x's shape]
std::vector<Array> reduce_scatter_vjp(const ir::VjpArgs& args) {
  const Params& params = args.params;
  return bind_collective(
      *kAllGather, {args.output_cotangents[0]},
      gather_params(axis_of(params), params.integer("scatter_dimension"), params.flag("tiled")));
}

// ppermute transpose (_ppermute_transpose_rule): send every cotangent back where its value
// came from. ct: [...] -> [...]
std::vector<Array> ppermute_vjp(const ir::VjpArgs& args) {
  Perm inverse;
  for (const auto& [source, destination] : parse_perm(args.params.text("perm"))) {
    inverse.emplace_back(destination, source);
  }
  return bind_collective(*kPpermute, {args.output_cotangents[0]},
                         permute_params(axis_of(args.params), inverse));
}

const ir::Primitive* register_collective(
    const std::string& name,
    std::function<std::vector<AbstractValue>(const std::vector<AbstractValue>&, const Params&)>
        abstract_eval,
    Vjp vjp, std::function<DeviceOutputs(const DeviceInputs&, const Params&)> kernel) {
  ir::Primitive primitive;
  primitive.name = name;
  primitive.abstract_eval = std::move(abstract_eval);
  primitive.vjp = std::move(vjp);
  primitive.collective_kernel = std::move(kernel);
  return ir::register_primitive(std::move(primitive));
}

const bool kRegistered = [] {
  kPsum = register_reduction("psum", Fold::kSum, /*allow_bool=*/false, psum_vjp);
  kPsumInvariant =
      register_reduction("psum_invariant", Fold::kSum, /*allow_bool=*/false, psum_invariant_vjp);
  register_reduction("pmax", Fold::kMax, /*allow_bool=*/true, no_differentiation_rule("pmax"));
  register_reduction("pmin", Fold::kMin, /*allow_bool=*/true, no_differentiation_rule("pmin"));
  // pvary (jax/_src/core.py pvary_p, rules in parallel.py): Invariant -> Varying, a no-op on
  // values ("lowers to a no-op", docs/notebooks/shard_map.md). Not a collective: each device
  // keeps its own buffer.
  ir::register_primitive({
      "pvary",
      [](const std::vector<AbstractValue>& inputs, const Params&) {
        expect_operands("pvary", inputs, 1);
        return inputs;
      },
      [](const std::vector<const Buffer*>& inputs, const Params&) {
        return std::vector<Buffer>{*inputs[0]};
      },
      pvary_vjp,
  });
  kAllGather = register_collective("all_gather", all_gather_abstract_eval, all_gather_vjp,
                                   all_gather_kernel);
  kReduceScatter = register_collective("reduce_scatter", reduce_scatter_abstract_eval,
                                       reduce_scatter_vjp, reduce_scatter_kernel);
  kPpermute = register_collective(
      "ppermute",
      [](const std::vector<AbstractValue>& inputs, const Params& params) {
        expect_operands("ppermute", inputs, 1);
        check_perm(parse_perm(params.text("perm")), params.integer("axis_size"));
        return inputs;
      },
      ppermute_vjp, ppermute_kernel);
  register_collective(
      "axis_index",
      [](const std::vector<AbstractValue>& inputs, const Params&) {
        expect_operands("axis_index", inputs, 0);
        return std::vector<AbstractValue>{{DType::i32, {}}};
      },
      nullptr, axis_index_kernel);
  return true;
}();

// ---------------------------------------------------------------------------------------------
// Public ops: helpers
// ---------------------------------------------------------------------------------------------

// jax.lax.psum: "Inputs of boolean dtype are converted to integers before the reduction."
Array bool_to_i32(const Array& x) { return x.dtype() == DType::bool_ ? astype(x, DType::i32) : x; }

// Binds one variadic reduction over all of `leaves`.
std::vector<Array> reduce_leaves(const char* op, const std::vector<Array>& leaves,
                                 const std::string& axis_name) {
  const AxisInfo axis = lookup_axis(axis_name, op);
  if (leaves.empty()) return {};
  return bind_collective(ir::find_primitive(op), leaves, reduction_params(axis));
}

Tree reduce_tree(const char* op, const Tree& x, const std::string& axis_name) {
  return x.unflatten(reduce_leaves(op, x.leaves(), axis_name));
}

// jax.lax.pmean: psum(x) / n with n a Python int: a weakly typed division that keeps a float
// dtype and turns an integer sum into f32 (true division).
Array divide_by_size(const Array& sum, int64_t num_devices) {
  const Array numerator = is_floating(sum.dtype()) ? sum : astype(sum, DType::f32);
  return numerator / static_cast<double>(num_devices);
}

// jax.lax.psum (_psum): under shard_map(check_vma=True) one psum_invariant per leaf
// (bind_psum_invariant, which pvary's an invariant leaf first: ir::insert_pvary); otherwise one
// variadic psum.
std::vector<Array> psum_leaves(std::vector<Array> leaves, const std::string& axis_name) {
  for (auto& leaf : leaves) leaf = bool_to_i32(leaf);
  if (!ir::checking_vma() || leaves.empty()) return reduce_leaves("psum", leaves, axis_name);
  for (auto& leaf : leaves) leaf = reduce_leaves("psum_invariant", {leaf}, axis_name).front();
  return leaves;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public ops
// ---------------------------------------------------------------------------------------------

Array psum(const Array& x, const std::string& axis_name) {
  return psum_leaves({x}, axis_name).front();
}

Tree psum(const Tree& x, const std::string& axis_name) {
  return x.unflatten(psum_leaves(x.leaves(), axis_name));
}

Array pmean(const Array& x, const std::string& axis_name) {
  const int64_t num_devices = lookup_axis(axis_name, "pmean").num_devices;
  return divide_by_size(psum(x, axis_name), num_devices);
}

Tree pmean(const Tree& x, const std::string& axis_name) {
  const int64_t num_devices = lookup_axis(axis_name, "pmean").num_devices;
  return tree_map([&](const Array& sum) { return divide_by_size(sum, num_devices); },
                  psum(x, axis_name));
}

Array pmax(const Array& x, const std::string& axis_name) {
  return reduce_leaves("pmax", {x}, axis_name).front();
}
Tree pmax(const Tree& x, const std::string& axis_name) { return reduce_tree("pmax", x, axis_name); }

Array pmin(const Array& x, const std::string& axis_name) {
  return reduce_leaves("pmin", {x}, axis_name).front();
}
Tree pmin(const Tree& x, const std::string& axis_name) { return reduce_tree("pmin", x, axis_name); }

Array all_gather(const Array& x, const std::string& axis_name, int64_t axis, bool tiled) {
  const AxisInfo info = lookup_axis(axis_name, "all_gather");
  // jax.lax.all_gather: canonicalize_axis(axis, ndim if tiled else ndim + 1).
  const int64_t dimension = normalize_axis("all_gather", axis, x.ndim() + (tiled ? 0 : 1));
  return bind_collective(*kAllGather, {x}, gather_params(info, dimension, tiled)).front();
}

Array psum_scatter(const Array& x, const std::string& axis_name, int64_t scatter_dimension,
                   bool tiled) {
  const AxisInfo info = lookup_axis(axis_name, "psum_scatter");
  const int64_t dimension = normalize_axis("psum_scatter", scatter_dimension, x.ndim());
  return bind_collective(*kReduceScatter, {x}, scatter_params(info, dimension, tiled)).front();
}

Array ppermute(const Array& x, const std::string& axis_name, const Perm& perm) {
  const AxisInfo info = lookup_axis(axis_name, "ppermute");
  return bind_collective(*kPpermute, {x}, permute_params(info, perm)).front();
}

Array axis_index(const std::string& axis_name) {
  const AxisInfo info = lookup_axis(axis_name, "axis_index");
  return bind_collective(ir::find_primitive("axis_index"), {}, index_params(info)).front();
}

int64_t axis_size(const std::string& axis_name) {
  return lookup_axis(axis_name, "axis_size").num_devices;
}

}  // namespace pmap_engine
