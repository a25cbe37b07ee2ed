// The reductions' schedule (pmap_engine/src/ops/collectives.cpp, "Reductions"): chunks of the
// element range, several devices per pass, threads over the range from 4 MiB of input,
// non-temporal stores above 16 MiB of output. None of it may change a bit: every element is
// still acc = x_0; acc = acc (+) x_1; ... in device order and in the compute type. These tests
// compare the psum/pmax/pmin kernels bit for bit with that fold written out here, on random
// values whose sums depend on the order (so a reordered fold would show), at sizes on both
// sides of every chunk and threshold, and end to end through pmap with an in-place op after the
// psum (every device must own its result).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/primitive.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/pmap.h"

namespace pmap_engine {
namespace {

enum class Op { kSum, kMax, kMin };

const char* op_name(Op op) {
  switch (op) {
    case Op::kSum:
      return "psum";
    case Op::kMax:
      return "pmax";
    case Op::kMin:
      break;
  }
  return "pmin";
}

// The reference fold of one element, in the compute type (as collectives.cpp documents it).
template <typename Compute>
Compute reference_step(Op op, Compute acc, Compute value) {
  if (op == Op::kSum) {
    if constexpr (std::is_integral_v<Compute>) {
      return static_cast<Compute>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(value));
    } else {
      return acc + value;
    }
  }
  if constexpr (std::is_floating_point_v<Compute>) {
    if (std::isnan(acc) || std::isnan(value)) return std::isnan(acc) ? acc : value;
  }
  if (op == Op::kMax) return value > acc ? value : acc;
  return value < acc ? value : acc;
}

// Random per-device buffers of `dtype`: floats of mixed magnitudes (order-dependent sums), a
// few NaNs and signed zeros for pmax/pmin, full-range integers (wrapping sums).
std::vector<Buffer> random_inputs(DType dtype, size_t num_devices, size_t num_elements,
                                  bool with_nans, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<Buffer> buffers;
  for (size_t d = 0; d < num_devices; ++d) {
    Buffer buffer =
        Buffer::allocate_uninitialized(dtype, {static_cast<int64_t>(num_elements)});
    for (size_t e = 0; e < num_elements; ++e) {
      float value = std::ldexp(mantissa(rng), exponent(rng));
      if (with_nans && e % 97 == 3 && d % 3 == 1) value = std::numeric_limits<float>::quiet_NaN();
      if (e % 89 == 5) value = (d % 2) ? 0.0f : -0.0f;
      switch (dtype) {
        case DType::f32:
          buffer.data<float>()[e] = value;
          break;
        case DType::f64:
          buffer.data<double>()[e] = static_cast<double>(value) * (1.0 + 1e-9 * (d + 1));
          break;
        case DType::bf16:
          buffer.data<uint16_t>()[e] = f32_to_bf16(value);
          break;
        case DType::f16:
          buffer.data<uint16_t>()[e] = f32_to_f16(value);
          break;
        case DType::i32:
        case DType::u32:
          buffer.data<uint32_t>()[e] = bits(rng);
          break;
        default:
          ADD_FAILURE() << "dtype not covered";
      }
    }
    buffers.push_back(std::move(buffer));
  }
  return buffers;
}

// The expected result bits of `op` over `inputs`, one element at a time.
Buffer reference(Op op, const std::vector<Buffer>& inputs) {
  const Buffer& first = inputs.front();
  Buffer out = Buffer::allocate_uninitialized(first.dtype, first.shape);
  const size_t n = first.num_elements();
  auto fold = [&](auto load, auto store) {
    for (size_t e = 0; e < n; ++e) {
      auto acc = load(inputs[0], e);
      for (size_t d = 1; d < inputs.size(); ++d) acc = reference_step(op, acc, load(inputs[d], e));
      store(out, e, acc);
    }
  };
  switch (first.dtype) {
    case DType::f32:
      fold([](const Buffer& b, size_t e) { return b.data<float>()[e]; },
           [](Buffer& b, size_t e, float v) { b.data<float>()[e] = v; });
      break;
    case DType::f64:
      fold([](const Buffer& b, size_t e) { return b.data<double>()[e]; },
           [](Buffer& b, size_t e, double v) { b.data<double>()[e] = v; });
      break;
    case DType::bf16:
      fold([](const Buffer& b, size_t e) { return bf16_to_f32(b.data<uint16_t>()[e]); },
           [](Buffer& b, size_t e, float v) { b.data<uint16_t>()[e] = f32_to_bf16(v); });
      break;
    case DType::f16:
      fold([](const Buffer& b, size_t e) { return f16_to_f32(b.data<uint16_t>()[e]); },
           [](Buffer& b, size_t e, float v) { b.data<uint16_t>()[e] = f32_to_f16(v); });
      break;
    case DType::i32:
      fold([](const Buffer& b, size_t e) { return b.data<int32_t>()[e]; },
           [](Buffer& b, size_t e, int32_t v) { b.data<int32_t>()[e] = v; });
      break;
    case DType::u32:
      fold([](const Buffer& b, size_t e) { return b.data<uint32_t>()[e]; },
           [](Buffer& b, size_t e, uint32_t v) { b.data<uint32_t>()[e] = v; });
      break;
    default:
      ADD_FAILURE() << "dtype not covered";
  }
  return out;
}

std::vector<std::vector<Buffer>> run_kernel(Op op, const std::vector<Buffer>& inputs) {
  std::vector<std::vector<const Buffer*>> operands(inputs.size());
  for (size_t d = 0; d < inputs.size(); ++d) operands[d] = {&inputs[d]};
  const ir::Params params{{"axes", std::string("('i',)")},
                          {"axis_name", std::string("i")},
                          {"axis_size", static_cast<int64_t>(inputs.size())}};
  return ir::find_primitive(op_name(op)).collective_kernel(operands, params);
}

// The first element whose bits differ, or -1.
int64_t first_difference(const Buffer& a, const Buffer& b) {
  const size_t width = dtype_num_bytes(a.dtype);
  for (size_t e = 0; e < a.num_elements(); ++e) {
    if (std::memcmp(a.bytes->data() + e * width, b.bytes->data() + e * width, width) != 0) {
      return static_cast<int64_t>(e);
    }
  }
  return -1;
}

void expect_bitwise(Op op, DType dtype, size_t num_devices, size_t num_elements) {
  SCOPED_TRACE(std::string(op_name(op)) + " " + dtype_name(dtype) + " devices=" +
               std::to_string(num_devices) + " elements=" + std::to_string(num_elements));
  const bool is_float = dtype != DType::i32 && dtype != DType::u32;
  const std::vector<Buffer> inputs =
      random_inputs(dtype, num_devices, num_elements, is_float && op != Op::kSum,
                    static_cast<uint32_t>(num_devices * 131 + num_elements));
  const Buffer expected = reference(op, inputs);
  const auto results = run_kernel(op, inputs);
  ASSERT_EQ(results.size(), num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    ASSERT_EQ(results[d].size(), 1u);
    const Buffer& out = results[d][0];
    ASSERT_EQ(out.dtype, dtype);
    ASSERT_EQ(out.shape, expected.shape);
    EXPECT_EQ(first_difference(out, expected), -1) << "device " << d;
    if (d > 0 && num_elements > 0) {
      EXPECT_NE(out.bytes.get(), results[0][0].bytes.get()) << "devices share a result";
    }
  }
}

// Chunks hold 32 KiB of compute values (8192 f32): sizes around one and two chunks, a ragged
// tail, and sizes past the threading (4 MiB of input in all) and streaming (16 MiB of output)
// thresholds.
TEST(CollectivesSchedule, SmallAndChunkBoundarySizesMatchTheDeviceOrderFoldBitwise) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::u32}) {
    for (size_t num_devices : {1, 2, 3, 4, 5, 8}) {
      for (size_t num_elements : {0, 1, 7, 4095, 4096, 8191, 8192, 8193, 20011}) {
        for (Op op : {Op::kSum, Op::kMax, Op::kMin}) {
          expect_bitwise(op, dtype, num_devices, num_elements);
        }
      }
    }
  }
}

TEST(CollectivesSchedule, ThreadedAndStreamedSizesMatchTheDeviceOrderFoldBitwise) {
  // 8 x 1.25 Mi f32: 40 MiB in and out (threads, streaming, huge-page advice).
  expect_bitwise(Op::kSum, DType::f32, 8, (5u << 20) / 4 + 3);
  expect_bitwise(Op::kMax, DType::f32, 8, (5u << 20) / 4 + 3);
  // Just past the thread threshold, not streamed; an odd device count.
  expect_bitwise(Op::kSum, DType::f32, 3, (4u << 20) / 12 + 1000);
  expect_bitwise(Op::kSum, DType::f64, 7, 300001);
  expect_bitwise(Op::kSum, DType::bf16, 8, 1200007);
  expect_bitwise(Op::kMin, DType::f16, 5, 700001);
  expect_bitwise(Op::kSum, DType::i32, 6, 500003);
}

// The data above is order-sensitive: folding the devices in reverse gives other bits for some
// element, so a reordered schedule could not pass.
TEST(CollectivesSchedule, TheTestDataDependsOnTheFoldOrder) {
  std::vector<Buffer> inputs = random_inputs(DType::f32, 8, 20011, false, 7);
  const Buffer forward = reference(Op::kSum, inputs);
  std::vector<Buffer> reversed(inputs.rbegin(), inputs.rend());
  EXPECT_NE(first_difference(reference(Op::kSum, reversed), forward), -1);
}

// Outputs of 64 KiB and more reuse the storage of dead outputs: never of live ones, and whatever
// a recycled storage held before is overwritten.
TEST(CollectivesSchedule, RecycledOutputStorageIsNeverStillInUse) {
  const size_t num_elements = (1u << 20) / 4;  // 1 MiB per device
  const std::vector<Buffer> a = random_inputs(DType::f32, 4, num_elements, false, 21);
  const std::vector<Buffer> b = random_inputs(DType::f32, 4, num_elements, false, 22);
  const Buffer sum_a = reference(Op::kSum, a);
  const Buffer sum_b = reference(Op::kSum, b);
  auto first = run_kernel(Op::kSum, a);
  auto second = run_kernel(Op::kSum, b);  // `first` is alive: no storage of it may be reused
  for (size_t d = 0; d < 4; ++d) {
    for (size_t e = 0; e < 4; ++e) {
      EXPECT_NE(second[d][0].bytes.get(), first[e][0].bytes.get()) << d << " " << e;
    }
    EXPECT_EQ(first_difference(first[d][0], sum_a), -1) << "device " << d;
    EXPECT_EQ(first_difference(second[d][0], sum_b), -1) << "device " << d;
  }
  first.clear();  // dead: the next call may take its storage, which holds sum_a
  const auto third = run_kernel(Op::kSum, b);
  for (size_t d = 0; d < 4; ++d) {
    EXPECT_EQ(first_difference(third[d][0], sum_b), -1) << "device " << d;
    EXPECT_EQ(first_difference(second[d][0], sum_b), -1) << "device " << d;
  }
}

// End to end: psum over 8 devices of 600k f32 (threaded), then an element-wise op that the
// executor may write over the dying psum result in place. Each device's row must be its own
// (sum * (d + 1)), bit for bit.
TEST(CollectivesSchedule, PmappedLargePsumFollowedByAnInPlaceOpKeepsDevicesApart) {
  const size_t num_devices = 8;
  const size_t num_elements = 600007;
  const std::vector<Buffer> rows =
      random_inputs(DType::f32, num_devices, num_elements, false, 11);
  std::vector<float> stacked;
  for (const Buffer& row : rows) {
    stacked.insert(stacked.end(), row.data<float>(), row.data<float>() + num_elements);
  }
  const Buffer sum = reference(Op::kSum, rows);

  PmapOptions options;
  options.axis_name = "i";
  options.devices = DeviceSet(static_cast<int>(num_devices));
  Pmapped mapped = pmap(
      [](const std::vector<Tree>& args) {
        const Array scale = astype(axis_index("i"), DType::f32) + 1.0;
        return Tree(psum(args[0].leaf(), "i") * scale);
      },
      options);
  const Array x = Array::from_floats(
      {static_cast<int64_t>(num_devices), static_cast<int64_t>(num_elements)}, stacked);
  const std::vector<float> out = mapped({Tree(x)}).leaf().to_floats();
  ASSERT_EQ(out.size(), num_devices * num_elements);
  for (size_t d = 0; d < num_devices; ++d) {
    size_t mismatches = 0;
    for (size_t e = 0; e < num_elements; ++e) {
      const float want = sum.data<float>()[e] * static_cast<float>(d + 1);
      if (std::memcmp(&out[d * num_elements + e], &want, sizeof(float)) != 0) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0u) << "device " << d;
  }
}

// ReductionTraffic counts what the schedule moves between device buffers: every other device's
// operand into device 0's output, and a copy of the result back to each. With S bytes per
// device (every leaf), device 0 sends and receives (N - 1) * S, every other device S. Two
// leaves: 1000 f32 (one chunk, one thread) and 600007 bf16 (1.2 MB a device, 9.6 MB in all:
// threaded, each thread reporting its own range).
TEST(CollectivesSchedule, ReductionTrafficIsAReduceToDeviceZeroThenABroadcast) {
  const size_t num_devices = 8;
  const std::vector<Buffer> small = random_inputs(DType::f32, num_devices, 1000, false, 31);
  const std::vector<Buffer> large = random_inputs(DType::bf16, num_devices, 600007, false, 32);
  const int64_t per_device = 1000 * 4 + 600007 * 2;
  std::vector<std::vector<const Buffer*>> operands(num_devices);
  for (size_t d = 0; d < num_devices; ++d) operands[d] = {&small[d], &large[d]};
  const ir::Params params{{"axes", std::string("('i',)")},
                          {"axis_name", std::string("i")},
                          {"axis_size", static_cast<int64_t>(num_devices)}};
  ir::find_primitive("psum").collective_kernel(operands, params);  // before counting: not counted

  ReductionTraffic traffic;
  EXPECT_TRUE(traffic.sent_bytes().empty());
  ir::find_primitive("psum").collective_kernel(operands, params);
  std::vector<int64_t> expected(num_devices, per_device);
  expected[0] = static_cast<int64_t>(num_devices - 1) * per_device;
  EXPECT_EQ(traffic.sent_bytes(), expected);
  EXPECT_EQ(traffic.received_bytes(), expected);
  EXPECT_THROW(ReductionTraffic(), EngineError);  // one counter at a time
}

}  // namespace
}  // namespace pmap_engine
