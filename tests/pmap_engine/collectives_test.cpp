// Collectives: psum, pmean, pmax, pmin, all_gather, psum_scatter (reduce_scatter), ppermute,
// axis_index, axis_size. Semantics from jax/_src/lax/parallel.py (jax-ml/jax at 006a6a63).
//
// Three levels:
//   kernel  the primitives' collective kernels called directly with per-device buffers, over
//           the grid device count {1,2,3,4,7,8} x element count {0,1,5,4097} x dtype {f32,
//           f64, i32, bf16}. Inputs are small integers (|v| <= 5), so every sum is exact in
//           every dtype and any order, and expected values are computed here in double.
//   trace   ops traced with an axis bound by hand (ir::ScopedAxis), without pmap: the printed
//           program, and the unbound-axis error of pitfall P1.
//   pmap    end to end (see the CollectivesPmap suite).
#include "pmap_engine/collectives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "ir/axis_env.h"
#include "ir/primitive.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/pmap.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using pmap_engine::testing::error_of;
using pmap_engine::testing::expect_error_mentions;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// Kernel level
// ---------------------------------------------------------------------------------------------

// Per-device operands: storage[d][i] is operand i on device d.
using DeviceBuffers = std::vector<std::vector<Buffer>>;
using DeviceResults = std::vector<std::vector<Buffer>>;

Buffer make_buffer(DType dtype, const Shape& shape, const std::vector<double>& values) {
  return astype(Array::from_doubles(shape, values), dtype).buffer();
}

std::vector<double> values_of(const Buffer& buffer) { return Array(buffer).to_doubles(); }

bool same_bytes(const Buffer& a, const Buffer& b) {
  return a.num_bytes() == b.num_bytes() &&
         (a.num_bytes() == 0 || std::memcmp(a.bytes->data(), b.bytes->data(), a.num_bytes()) == 0);
}

DeviceResults run_collective(const std::string& name, const DeviceBuffers& storage,
                             const ir::Params& params) {
  std::vector<std::vector<const Buffer*>> inputs(storage.size());
  for (size_t d = 0; d < storage.size(); ++d) {
    for (const auto& buffer : storage[d]) inputs[d].push_back(&buffer);
  }
  const ir::Primitive& primitive = ir::find_primitive(name);
  EXPECT_FALSE(primitive.kernel) << name << " is a collective: no single-device kernel";
  return primitive.collective_kernel(inputs, params);
}

// The params the public ops bind, for an axis "i" of num_devices.
ir::Params reduction_params(int64_t num_devices) {
  return {
      {"axes", std::string("('i',)")}, {"axis_name", std::string("i")}, {"axis_size", num_devices}};
}
ir::Params gather_params(int64_t num_devices, int64_t dimension, bool tiled) {
  return {{"all_gather_dimension", dimension},
          {"axis_name", std::string("i")},
          {"axis_size", num_devices},
          {"tiled", tiled}};
}
ir::Params scatter_params(int64_t num_devices, int64_t dimension, bool tiled) {
  return {{"axis_name", std::string("i")},
          {"axis_size", num_devices},
          {"scatter_dimension", dimension},
          {"tiled", tiled}};
}
ir::Params permute_params(int64_t num_devices, const std::string& perm) {
  return {{"axis_name", std::string("i")}, {"axis_size", num_devices}, {"perm", perm}};
}

// A small integer in [-5, 5] that varies with device and element.
double grid_value(size_t device, size_t element) {
  return static_cast<double>(static_cast<int64_t>((device * 7 + element * 3) % 11) - 5);
}

struct GridCase {
  size_t num_devices;
  size_t num_elements;
  DType dtype;
};

// How gtest prints a case (in failure messages and ctest's test list).
void PrintTo(const GridCase& c, std::ostream* out) {
  *out << c.num_devices << " devices, " << c.num_elements << " " << dtype_name(c.dtype)
       << " elements";
}

std::string grid_case_name(const ::testing::TestParamInfo<GridCase>& info) {
  return "devices" + std::to_string(info.param.num_devices) + "_elements" +
         std::to_string(info.param.num_elements) + "_" + dtype_name(info.param.dtype);
}

std::vector<GridCase> grid() {
  std::vector<GridCase> cases;
  for (size_t num_devices : {1, 2, 3, 4, 7, 8}) {
    for (size_t num_elements : {0, 1, 5, 4097}) {
      for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::bf16}) {
        cases.push_back({num_devices, num_elements, dtype});
      }
    }
  }
  return cases;
}

class CollectivesKernelGrid : public ::testing::TestWithParam<GridCase> {
 protected:
  // x_d: [num_elements], x_d[e] = grid_value(d, e).
  DeviceBuffers vectors() const {
    const GridCase& c = GetParam();
    DeviceBuffers storage(c.num_devices);
    for (size_t d = 0; d < c.num_devices; ++d) {
      std::vector<double> values(c.num_elements);
      for (size_t e = 0; e < c.num_elements; ++e) values[e] = grid_value(d, e);
      storage[d].push_back(make_buffer(c.dtype, {static_cast<int64_t>(c.num_elements)}, values));
    }
    return storage;
  }
  int64_t num_devices() const { return static_cast<int64_t>(GetParam().num_devices); }

  // Every device got one result equal to `expected`, the same bits as device 0's, in storage
  // of its own.
  void expect_replicated(const DeviceResults& results, const std::vector<double>& expected) {
    const GridCase& c = GetParam();
    ASSERT_EQ(results.size(), c.num_devices);
    for (size_t d = 0; d < c.num_devices; ++d) {
      ASSERT_EQ(results[d].size(), 1u);
      EXPECT_EQ(results[d][0].dtype, c.dtype);
      EXPECT_EQ(results[d][0].shape, (Shape{static_cast<int64_t>(c.num_elements)}));
      EXPECT_EQ(values_of(results[d][0]), expected) << "device " << d;
      EXPECT_TRUE(same_bytes(results[d][0], results[0][0])) << "device " << d;
      if (d > 0 && c.num_elements > 0) {
        EXPECT_NE(results[d][0].bytes.get(), results[0][0].bytes.get())
            << "devices must not share a result buffer (in-place updates)";
      }
    }
  }
};

TEST_P(CollectivesKernelGrid, PsumIsTheExactSumOnEveryDevice) {
  const GridCase& c = GetParam();
  std::vector<double> expected(c.num_elements, 0.0);
  for (size_t e = 0; e < c.num_elements; ++e) {
    for (size_t d = 0; d < c.num_devices; ++d) expected[e] += grid_value(d, e);
  }
  expect_replicated(run_collective("psum", vectors(), reduction_params(num_devices())), expected);
}

TEST_P(CollectivesKernelGrid, PmaxAndPminAreTheExtremesOnEveryDevice) {
  const GridCase& c = GetParam();
  std::vector<double> highest(c.num_elements, -1e9);
  std::vector<double> lowest(c.num_elements, 1e9);
  for (size_t e = 0; e < c.num_elements; ++e) {
    for (size_t d = 0; d < c.num_devices; ++d) {
      highest[e] = std::max(highest[e], grid_value(d, e));
      lowest[e] = std::min(lowest[e], grid_value(d, e));
    }
  }
  expect_replicated(run_collective("pmax", vectors(), reduction_params(num_devices())), highest);
  expect_replicated(run_collective("pmin", vectors(), reduction_params(num_devices())), lowest);
}

TEST_P(CollectivesKernelGrid, AllGatherStacksDevicesInOrder) {
  const GridCase& c = GetParam();
  // out: [N, num_elements], row d = x_d.
  std::vector<double> expected;
  for (size_t d = 0; d < c.num_devices; ++d) {
    for (size_t e = 0; e < c.num_elements; ++e) expected.push_back(grid_value(d, e));
  }
  DeviceResults results =
      run_collective("all_gather", vectors(), gather_params(num_devices(), 0, false));
  ASSERT_EQ(results.size(), c.num_devices);
  for (size_t d = 0; d < c.num_devices; ++d) {
    EXPECT_EQ(results[d][0].shape, (Shape{num_devices(), static_cast<int64_t>(c.num_elements)}));
    EXPECT_EQ(values_of(results[d][0]), expected) << "device " << d;
  }
}

TEST_P(CollectivesKernelGrid, ReduceScatterKeepsOneRowOfTheSumPerDevice) {
  const GridCase& c = GetParam();
  // x_d: [N, num_elements] with x_d[r, e] = grid_value(d, r * num_elements + e);
  // device r gets sum_d x_d[r, :].
  const size_t n = c.num_elements;
  DeviceBuffers storage(c.num_devices);
  for (size_t d = 0; d < c.num_devices; ++d) {
    std::vector<double> values(c.num_devices * n);
    for (size_t i = 0; i < values.size(); ++i) values[i] = grid_value(d, i);
    storage[d].push_back(make_buffer(c.dtype, {num_devices(), static_cast<int64_t>(n)}, values));
  }
  DeviceResults results =
      run_collective("reduce_scatter", storage, scatter_params(num_devices(), 0, false));
  ASSERT_EQ(results.size(), c.num_devices);
  for (size_t r = 0; r < c.num_devices; ++r) {
    std::vector<double> expected(n, 0.0);
    for (size_t e = 0; e < n; ++e) {
      for (size_t d = 0; d < c.num_devices; ++d) expected[e] += grid_value(d, r * n + e);
    }
    EXPECT_EQ(results[r][0].shape, (Shape{static_cast<int64_t>(n)}));
    EXPECT_EQ(values_of(results[r][0]), expected) << "device " << r;
  }
}

TEST_P(CollectivesKernelGrid, PpermuteRingShiftMovesEachValueOneDeviceOn) {
  const GridCase& c = GetParam();
  // perm ((0, 1), (1, 2), ..., (N-1, 0)): device (d + 1) % N receives x_d.
  std::string perm = "(";
  for (size_t d = 0; d < c.num_devices; ++d) {
    perm += (d ? ", (" : "(") + std::to_string(d) + ", " + std::to_string((d + 1) % c.num_devices) +
            ")";
  }
  perm += c.num_devices == 1 ? ",)" : ")";
  DeviceResults results =
      run_collective("ppermute", vectors(), permute_params(num_devices(), perm));
  ASSERT_EQ(results.size(), c.num_devices);
  for (size_t d = 0; d < c.num_devices; ++d) {
    const size_t receiver = (d + 1) % c.num_devices;
    std::vector<double> expected(c.num_elements);
    for (size_t e = 0; e < c.num_elements; ++e) expected[e] = grid_value(d, e);
    EXPECT_EQ(values_of(results[receiver][0]), expected) << "device " << receiver;
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollectivesKernelGrid, ::testing::ValuesIn(grid()),
                         grid_case_name);

TEST(CollectivesKernel, PsumOfATreeReducesEveryLeafInOneCall) {
  // Two leaves of different dtypes and shapes: f32[2] and i32[3], on 3 devices.
  DeviceBuffers storage(3);
  for (size_t d = 0; d < 3; ++d) {
    const double v = static_cast<double>(d + 1);
    storage[d].push_back(make_buffer(DType::f32, {2}, {v, 10 * v}));
    storage[d].push_back(make_buffer(DType::i32, {3}, {v, -v, 100 * v}));
  }
  DeviceResults results = run_collective("psum", storage, reduction_params(3));
  for (size_t d = 0; d < 3; ++d) {
    ASSERT_EQ(results[d].size(), 2u);
    EXPECT_EQ(results[d][0].dtype, DType::f32);
    EXPECT_EQ(values_of(results[d][0]), (std::vector<double>{6, 60}));
    EXPECT_EQ(results[d][1].dtype, DType::i32);
    EXPECT_EQ(values_of(results[d][1]), (std::vector<double>{6, -6, 600}));
  }
}

TEST(CollectivesKernel, PsumFoldsF32InDeviceOrder) {
  // Device values 1e8, 1, -1e8: left to right in f32, (1e8 + 1) rounds back to 1e8 (the f32
  // spacing there is 8), so the sum is 0; any other grouping, e.g. 1 + (1e8 - 1e8), gives 1.
  DeviceBuffers storage(3);
  const std::vector<double> device_values = {1e8, 1, -1e8};
  for (size_t d = 0; d < 3; ++d)
    storage[d].push_back(make_buffer(DType::f32, {}, {device_values[d]}));
  DeviceResults results = run_collective("psum", storage, reduction_params(3));
  for (size_t d = 0; d < 3; ++d) EXPECT_EQ(values_of(results[d][0]), std::vector<double>{0.0});

  // Irregular values: bitwise equal to a left fold in f32, and to a second run.
  const size_t num_devices = 7;
  const size_t num_elements = 4097;
  DeviceBuffers irregular(num_devices);
  std::vector<float> fold(num_elements, 0.0f);
  for (size_t d = 0; d < num_devices; ++d) {
    std::vector<float> values(num_elements);
    for (size_t e = 0; e < num_elements; ++e) {
      values[e] = static_cast<float>(std::sin(0.37 * static_cast<double>(d * num_elements + e)) *
                                     std::pow(10.0, static_cast<double>(e % 7)));
      fold[e] = d == 0 ? values[e] : fold[e] + values[e];
    }
    irregular[d].push_back(
        Array::from_floats({static_cast<int64_t>(num_elements)}, values).buffer());
  }
  DeviceResults first = run_collective("psum", irregular, reduction_params(num_devices));
  DeviceResults second = run_collective("psum", irregular, reduction_params(num_devices));
  const float* summed = first[0][0].data<float>();
  EXPECT_EQ(std::memcmp(summed, fold.data(), num_elements * sizeof(float)), 0);
  for (size_t d = 0; d < num_devices; ++d) {
    EXPECT_TRUE(same_bytes(first[d][0], first[0][0])) << "device " << d;
    EXPECT_TRUE(same_bytes(second[d][0], first[0][0])) << "device " << d;
  }
}

TEST(CollectivesKernel, PsumOfHalfTypesAccumulatesInF32AndRoundsOnce) {
  // bf16 has 8 significant bits: 257 is not representable and 256 + 1 rounds (to even) back to
  // 256. Folding 256 + 1 + 1 in bf16 would give 256; in f32 it is 258, which bf16 holds.
  DeviceBuffers bf16(3);
  const std::vector<double> bf16_values = {256, 1, 1};
  for (size_t d = 0; d < 3; ++d) bf16[d].push_back(make_buffer(DType::bf16, {}, {bf16_values[d]}));
  EXPECT_EQ(values_of(run_collective("psum", bf16, reduction_params(3))[2][0]),
            std::vector<double>{258});
  // f16 has 11 significant bits: the same at 2048 (2048 + 1 + 1 = 2050, not 2048).
  DeviceBuffers f16(3);
  const std::vector<double> f16_values = {2048, 1, 1};
  for (size_t d = 0; d < 3; ++d) f16[d].push_back(make_buffer(DType::f16, {}, {f16_values[d]}));
  EXPECT_EQ(values_of(run_collective("psum", f16, reduction_params(3))[0][0]),
            std::vector<double>{2050});
}

TEST(CollectivesKernel, PsumOfI32WrapsAroundAsXla) {
  DeviceBuffers storage(2);
  storage[0].push_back(Array::from_ints({1}, {std::numeric_limits<int32_t>::max()}).buffer());
  storage[1].push_back(Array::from_ints({1}, {1}).buffer());
  DeviceResults results = run_collective("psum", storage, reduction_params(2));
  EXPECT_EQ(results[1][0].data<int32_t>()[0], std::numeric_limits<int32_t>::min());
}

TEST(CollectivesKernel, PmaxAndPminPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  DeviceBuffers storage(3);
  const std::vector<std::vector<double>> values = {{1, nan}, {nan, 2}, {3, -4}};
  for (size_t d = 0; d < 3; ++d) storage[d].push_back(make_buffer(DType::f32, {2}, values[d]));
  for (const char* name : {"pmax", "pmin"}) {
    DeviceResults results = run_collective(name, storage, reduction_params(3));
    EXPECT_TRUE(std::isnan(values_of(results[0][0])[0])) << name;
    EXPECT_TRUE(std::isnan(values_of(results[0][0])[1])) << name;
  }
}

// x_d: [2, 3] with x_d[a, b] = 100 d + 10 a + b, on 3 devices.
DeviceBuffers two_by_three(size_t num_devices, DType dtype = DType::f32) {
  DeviceBuffers storage(num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    std::vector<double> values;
    for (int a = 0; a < 2; ++a) {
      for (int b = 0; b < 3; ++b) values.push_back(100.0 * static_cast<double>(d) + 10 * a + b);
    }
    storage[d].push_back(make_buffer(dtype, {2, 3}, values));
  }
  return storage;
}

TEST(CollectivesKernel, AllGatherAtAnInnerDimensionStackedAndTiled) {
  // np.stack([x_0, x_1, x_2], axis=1): [2, 3, 3], out[a, d, b] = x_d[a, b].
  DeviceResults stacked = run_collective("all_gather", two_by_three(3), gather_params(3, 1, false));
  EXPECT_EQ(stacked[1][0].shape, (Shape{2, 3, 3}));
  EXPECT_EQ(values_of(stacked[1][0]),
            (std::vector<double>{0, 1, 2, 100, 101, 102, 200, 201, 202, 10, 11, 12, 110, 111, 112,
                                 210, 211, 212}));
  // np.concatenate([x_0, x_1, x_2], axis=1): [2, 9].
  DeviceResults tiled = run_collective("all_gather", two_by_three(3), gather_params(3, 1, true));
  EXPECT_EQ(tiled[2][0].shape, (Shape{2, 9}));
  EXPECT_EQ(values_of(tiled[2][0]), values_of(stacked[1][0]));  // same row-major order
  // np.concatenate(..., axis=0): [6, 3].
  DeviceResults rows = run_collective("all_gather", two_by_three(3), gather_params(3, 0, true));
  EXPECT_EQ(rows[0][0].shape, (Shape{6, 3}));
  EXPECT_EQ(values_of(rows[0][0]), (std::vector<double>{0, 1, 2, 10, 11, 12, 100, 101, 102, 110,
                                                        111, 112, 200, 201, 202, 210, 211, 212}));
  // Widths other than 4 bytes move unchanged: f64 and bf16 (integers < 256 are exact).
  for (DType dtype : {DType::f64, DType::bf16}) {
    DeviceResults other =
        run_collective("all_gather", two_by_three(2, dtype), gather_params(2, 2, false));
    EXPECT_EQ(other[0][0].shape, (Shape{2, 3, 2}));
    EXPECT_EQ(values_of(other[0][0]),
              (std::vector<double>{0, 100, 1, 101, 2, 102, 10, 110, 11, 111, 12, 112}));
  }
}

TEST(CollectivesKernel, ReduceScatterTiledAndAtAnInnerDimension) {
  // 3 devices, x_d: [2, 3]; untiled at dimension 1 (size 3 = N): device r gets
  // sum_d x_d[:, r] = [300 + 3r, 330 + 3r].
  DeviceResults untiled =
      run_collective("reduce_scatter", two_by_three(3), scatter_params(3, 1, false));
  for (size_t r = 0; r < 3; ++r) {
    const double rr = static_cast<double>(r);
    EXPECT_EQ(untiled[r][0].shape, (Shape{2}));
    EXPECT_EQ(values_of(untiled[r][0]), (std::vector<double>{300 + 3 * rr, 330 + 3 * rr}));
  }
  // Tiled at dimension 0 on 2 devices (2 rows / 2 = blocks of 1 row): device r gets
  // sum_d x_d[r:r+1, :] = [[100 + 20 r + 2 b for b]].
  DeviceResults tiled =
      run_collective("reduce_scatter", two_by_three(2), scatter_params(2, 0, true));
  EXPECT_EQ(tiled[0][0].shape, (Shape{1, 3}));
  EXPECT_EQ(values_of(tiled[0][0]), (std::vector<double>{100, 102, 104}));
  EXPECT_EQ(values_of(tiled[1][0]), (std::vector<double>{120, 122, 124}));
}

TEST(CollectivesKernel, PpermuteFillsDevicesNobodySendsToWithZeros) {
  // jax.lax.ppermute: "For each index of the axis that does not correspond to a destination
  // index in perm, the corresponding values in the result are filled with zeros".
  DeviceBuffers storage(4);
  for (size_t d = 0; d < 4; ++d)
    storage[d].push_back(make_buffer(DType::i32, {2}, {1.0 + d, -1.0 - d}));
  DeviceResults results =
      run_collective("ppermute", storage, permute_params(4, "((0, 2), (3, 1))"));
  EXPECT_EQ(values_of(results[0][0]), (std::vector<double>{0, 0}));
  EXPECT_EQ(values_of(results[1][0]), (std::vector<double>{4, -4}));
  EXPECT_EQ(values_of(results[2][0]), (std::vector<double>{1, -1}));
  EXPECT_EQ(values_of(results[3][0]), (std::vector<double>{0, 0}));
}

TEST(CollectivesKernel, AxisIndexIsEachDevicesPosition) {
  for (size_t num_devices : {1, 2, 3, 4, 7, 8}) {
    DeviceBuffers no_operands(num_devices);
    DeviceResults results = run_collective(
        "axis_index", no_operands,
        {{"axis_name", std::string("i")}, {"axis_size", static_cast<int64_t>(num_devices)}});
    ASSERT_EQ(results.size(), num_devices);
    for (size_t d = 0; d < num_devices; ++d) {
      EXPECT_EQ(results[d][0].dtype, DType::i32);
      EXPECT_EQ(results[d][0].shape, Shape{});
      EXPECT_EQ(results[d][0].data<int32_t>()[0], static_cast<int32_t>(d));
    }
  }
}

TEST(CollectivesKernel, ShapeErrorsNameTheOpTheOperandAndTheAxis) {
  const ir::Primitive& scatter = ir::find_primitive("reduce_scatter");
  const ir::AbstractValue x{DType::f32, {3, 5}};
  expect_error_mentions([&] { scatter.abstract_eval({x}, scatter_params(4, 0, false)); },
                        {"psum_scatter", "scatter dimension size 3 must match shard count 4",
                         "f32[3,5]", "'i'", "tiled=true"});
  expect_error_mentions([&] { scatter.abstract_eval({x}, scatter_params(4, 1, true)); },
                        {"psum_scatter", "size 5 must be divisible by shard_count 4", "f32[3,5]"});
  const ir::Primitive& gather = ir::find_primitive("all_gather");
  expect_error_mentions([&] { gather.abstract_eval({x}, gather_params(4, 2, true)); },
                        {"all_gather", "axis 2 is out of bounds", "f32[3,5]"});
  const ir::Primitive& permute = ir::find_primitive("ppermute");
  expect_error_mentions(
      [&] { permute.abstract_eval({x}, permute_params(4, "((0, 1), (2, 1))")); },
      {"ppermute", "sources and destinations must be unique", "((0, 1), (2, 1))"});
  expect_error_mentions([&] { permute.abstract_eval({x}, permute_params(4, "((0, 4),)")); },
                        {"ppermute", "((0, 4),)", "outside the axis of 4 devices"});
}

// ---------------------------------------------------------------------------------------------
// Trace level: an axis bound by hand, the function traced like jit traces it.
// ---------------------------------------------------------------------------------------------

size_t count_of(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST(CollectivesTrace, UnboundAxisNameNamesTheAxisAndTheBoundOnes) {
  // Pitfall P1: pmap(axis_name='batch') with psum(..., axis_name='devices').
  ir::ScopedAxis batch("batch", 4);
  const Array x = Array::from_floats({2}, {1, 2});
  const std::vector<std::function<void()>> uses = {
      [&] { psum(x, "devices"); },         [&] { psum(Tree::tuple({x, x}), "devices"); },
      [&] { pmean(x, "devices"); },        [&] { pmax(x, "devices"); },
      [&] { pmin(x, "devices"); },         [&] { all_gather(x, "devices"); },
      [&] { psum_scatter(x, "devices"); }, [&] { ppermute(x, "devices", {{0, 1}}); },
      [&] { axis_index("devices"); },      [&] { axis_size("devices"); },
  };
  for (const auto& use : uses) {
    expect_error_mentions(
        use, {"unbound axis name: devices", "names bound here are ['batch']"});
  }
  EXPECT_THAT(error_of([&] { psum(x, "devices"); }), HasSubstr("(pmap_engine: raised by psum;"));
  EXPECT_THAT(error_of([&] { all_gather(x, "devices"); }),
              HasSubstr("(pmap_engine: raised by all_gather;"));
}

TEST(CollectivesTrace, NoEnclosingPmapIsTheSameError) {
  expect_error_mentions([] { psum(Array::scalar(1.0), "data"); },
                        {"unbound axis name: data", "[]"});
}

TEST(CollectivesTrace, BoundAxisButNothingTracingIsRefused) {
  ir::ScopedAxis data("data", 2);
  EXPECT_EQ(axis_size("data"), 2);
  expect_error_mentions([] { psum(Array::scalar(1.0), "data"); },
                        {"psum", "'data'", "only inside a function traced by pmap"});
}

TEST(CollectivesTrace, PytreePsumFusesIntoOneReduction) {
  ir::ScopedAxis data("data", 4);
  TreeFunction f = [](const std::vector<Tree>& args) { return psum(args[0], "data"); };
  Tree grads = Tree::dict({{"b", Array::from_floats({3}, {1, 2, 3})},
                           {"w", Array::from_floats({2, 3}, {1, 2, 3, 4, 5, 6})}});
  const std::string program = make_program(f, {grads});
  EXPECT_EQ(count_of(program, "psum["), 1u) << program;
  EXPECT_THAT(program, HasSubstr("psum[axes=('data',) axis_name=data axis_size=4]")) << program;
  // One equation, two outputs: "c:f32[3] d:f32[2,3] = psum[...] a b".
  EXPECT_THAT(program, HasSubstr("c:f32[3] d:f32[2,3] = psum")) << program;
}

TEST(CollectivesTrace, PmeanIsPsumThenDivisionBySize) {
  ir::ScopedAxis data("data", 8);
  TreeFunction f = [](const std::vector<Tree>& args) { return pmean(args[0].leaf(), "data"); };
  const std::string program = make_program(f, {Array::from_floats({2}, {1, 2})});
  EXPECT_THAT(program, HasSubstr("psum[axes=('data',)")) << program;
  EXPECT_THAT(program, HasSubstr("div b 8.0:f32[]")) << program;
  // Integers sum as i32 and divide in f32 (true division), as jnp does for int / int.
  const std::string ints = make_program(f, {Array::from_ints({2}, {1, 2})});
  EXPECT_THAT(ints, HasSubstr("b:i32[2] = psum")) << ints;
  EXPECT_THAT(ints, HasSubstr("convert_element_type[new_dtype=f32")) << ints;
}

TEST(CollectivesTrace, BoolPsumSumsAsI32) {
  ir::ScopedAxis data("data", 2);
  TreeFunction f = [](const std::vector<Tree>& args) { return psum(args[0].leaf(), "data"); };
  Array flags = greater(Array::from_floats({2}, {1, -1}), Array::scalar(0.0));
  const std::string program = make_program(f, {flags});
  EXPECT_THAT(program, HasSubstr(":i32[2] = psum")) << program;
}

TEST(CollectivesTrace, ProgramsPrintEveryCollectiveWithItsParams) {
  ir::ScopedAxis data("data", 4);
  TreeFunction f = [](const std::vector<Tree>& args) {
    const Array& x = args[0].leaf();  // [4, 2]
    return Tree::tuple({pmax(x, "data"), pmin(x, "data"), all_gather(x, "data", -1),
                        psum_scatter(x, "data", 0, true), ppermute(x, "data", {{0, 1}, {1, 0}}),
                        axis_index("data")});
  };
  const std::string program = make_program(f, {Array::from_floats({4, 2}, std::vector<float>(8))});
  EXPECT_THAT(program, HasSubstr("pmax[axes=('data',) axis_name=data axis_size=4]"));
  EXPECT_THAT(program, HasSubstr("pmin[axes=('data',)"));
  EXPECT_THAT(program, HasSubstr("f32[4,2,4] = all_gather[all_gather_dimension=2 axis_name=data "
                                 "axis_size=4 tiled=False]"));
  EXPECT_THAT(
      program,
      HasSubstr(
          "f32[1,2] = reduce_scatter[axis_name=data axis_size=4 scatter_dimension=0 tiled=True]"));
  EXPECT_THAT(program, HasSubstr("ppermute[axis_name=data axis_size=4 perm=((0, 1), (1, 0))]"));
  EXPECT_THAT(program, HasSubstr("i32[] = axis_index[axis_name=data axis_size=4]"));
}

TEST(CollectivesTrace, GradOfAPsummedLossHasTheTransposedPsum) {
  // Pitfall P3 in the program: the backward pass of psum(sum(x^2)) starts with a psum of the
  // loss's cotangent, so the gradient is N times the per-device one.
  ir::ScopedAxis data("data", 4);
  TreeFunction loss = [](const std::vector<Tree>& args) {
    return Tree(psum(sum(square(args[0].leaf())), "data"));
  };
  const std::string program = make_program(grad(loss), {Array::from_floats({3}, {1, 2, 3})});
  EXPECT_EQ(count_of(program, "psum["), 2u) << program;
}

TEST(CollectivesTrace, PmaxAndPminHaveNoDifferentiationRuleAsInJax) {
  ir::ScopedAxis data("data", 2);
  for (const char* name : {"pmax", "pmin"}) {
    TreeFunction loss = [name](const std::vector<Tree>& args) {
      const Array& x = args[0].leaf();
      return Tree(sum(std::string(name) == "pmax" ? pmax(x, "data") : pmin(x, "data")));
    };
    expect_error_mentions(
        [&] {
          make_program(grad(loss), {Array::from_floats({2}, {1, 2})});
        },
        {std::string("Differentiation rule for '") + name + "' not implemented"});
    // Applied to an argument that is not differentiated: no rule is needed, as in JAX.
    TreeFunction other = [name](const std::vector<Tree>& args) {
      const Array& y = args[1].leaf();
      return Tree(sum(std::string(name) == "pmax" ? pmax(y, "data") : pmin(y, "data")) +
                  sum(args[0].leaf()));
    };
    EXPECT_NO_THROW(make_program(
        grad(other, {0}), {Array::from_floats({2}, {1, 2}), Array::from_floats({2}, {3, 4})}));
  }
}

TEST(CollectivesTrace, ShapeErrorsOfThePublicOps) {
  ir::ScopedAxis data("data", 4);
  auto trace = [](std::function<Array(const Array&)> op, Array x) {
    TreeFunction f = [op](const std::vector<Tree>& args) { return Tree(op(args[0].leaf())); };
    make_program(f, {x});
  };
  const Array x = Array::from_floats({3}, {1, 2, 3});
  expect_error_mentions([&] { trace([](const Array& v) { return psum_scatter(v, "data"); }, x); },
                        {"psum_scatter", "must match shard count 4", "f32[3]"});
  expect_error_mentions([&] { trace([](const Array& v) { return all_gather(v, "data", 2); }, x); },
                        {"all_gather", "axis 2 is out of bounds"});
  expect_error_mentions(
      [&] {
        trace([](const Array& v) { return ppermute(v, "data", {{0, 1}, {0, 2}}); }, x);
      },
      {"ppermute", "must be unique", "((0, 1), (0, 2))"});
}

// ---------------------------------------------------------------------------------------------
// pmap level: end to end on N virtual devices.
// ---------------------------------------------------------------------------------------------

PmapOptions on_devices(int count, const std::string& axis_name = "data") {
  PmapOptions options;
  options.axis_name = axis_name;
  options.devices = DeviceSet(count);
  return options;
}

// A pmapped function of arrays.
Array run_mapped(int num_devices, std::function<Array(const std::vector<Array>&)> fn,
                 const std::vector<Array>& inputs) {
  Pmapped mapped = pmap(
      [fn](const std::vector<Tree>& args) {
        std::vector<Array> arrays;
        for (const auto& arg : args) arrays.push_back(arg.leaf());
        return Tree(fn(arrays));
      },
      on_devices(num_devices));
  return mapped(std::vector<Tree>(inputs.begin(), inputs.end())).leaf();
}

// x: [N, K] with x[d, k] = grid_value(d, k), as f32.
Array device_rows(size_t num_devices, size_t num_columns, DType dtype = DType::f32) {
  std::vector<double> values;
  for (size_t d = 0; d < num_devices; ++d) {
    for (size_t k = 0; k < num_columns; ++k) values.push_back(grid_value(d, k));
  }
  return astype(Array::from_doubles(
                    {static_cast<int64_t>(num_devices), static_cast<int64_t>(num_columns)}, values),
                dtype);
}

TEST(CollectivesPmap, PsumPmeanPmaxPminValuesOnEveryDevice) {
  for (int n : {1, 2, 3, 4, 7, 8}) {
    const size_t num_devices = static_cast<size_t>(n);
    const Array x = device_rows(num_devices, 5);  // [N, 5]
    std::vector<float> sums(5, 0.0f), highest(5, -1e9f), lowest(5, 1e9f);
    for (size_t k = 0; k < 5; ++k) {
      for (size_t d = 0; d < num_devices; ++d) {
        const float v = static_cast<float>(grid_value(d, k));
        sums[k] += v;
        highest[k] = std::max(highest[k], v);
        lowest[k] = std::min(lowest[k], v);
      }
    }
    auto expect_rows = [&](const Array& out, const std::vector<float>& row, const char* op) {
      ASSERT_EQ(out.shape(), (Shape{n, 5})) << op;
      std::vector<float> values = out.to_floats();
      for (size_t d = 0; d < num_devices; ++d) {
        EXPECT_EQ(std::vector<float>(values.begin() + static_cast<int64_t>(d * 5),
                                     values.begin() + static_cast<int64_t>(d * 5 + 5)),
                  row)
            << op << " on device " << d << " of " << n;
      }
    };
    expect_rows(run_mapped(n, [](const auto& a) { return psum(a[0], "data"); }, {x}), sums, "psum");
    // pmean = psum / N in f32 (the sums are exact; the division rounds once, as in JAX).
    std::vector<float> means(5);
    for (size_t k = 0; k < 5; ++k) means[k] = sums[k] / static_cast<float>(n);
    expect_rows(run_mapped(n, [](const auto& a) { return pmean(a[0], "data"); }, {x}), means,
                "pmean");
    expect_rows(run_mapped(n, [](const auto& a) { return pmax(a[0], "data"); }, {x}), highest,
                "pmax");
    expect_rows(run_mapped(n, [](const auto& a) { return pmin(a[0], "data"); }, {x}), lowest,
                "pmin");
  }
}

TEST(CollectivesPmap, JaxDocstringExamples) {
  // jax/_src/lax/parallel.py docstrings, 4 devices, x = np.arange(4):
  //   pmap(lambda x: psum(x, 'i'))(x)          -> [6 6 6 6]
  //   pmap(lambda x: x / psum(x, 'i'))(x)      -> [0. 0.16666667 0.33333334 0.5]
  //   pmap(lambda x: pmean(x, 'i'))(x)         -> [1.5 1.5 1.5 1.5]
  //   pmap(lambda x: all_gather(x, 'i'))(x)    -> [[0 1 2 3]] * 4
  //   pmap(lambda _: axis_index('i'))(x)       -> [0 1 2 3] (int32)
  const Array x = Array::from_ints({4}, {0, 1, 2, 3});
  EXPECT_EQ(run_mapped(4, [](const auto& a) { return psum(a[0], "data"); }, {x}).to_ints(),
            (std::vector<int64_t>{6, 6, 6, 6}));
  const Array xf = astype(x, DType::f32);
  EXPECT_EQ(
      run_mapped(4, [](const auto& a) { return a[0] / psum(a[0], "data"); }, {xf}).to_floats(),
      (std::vector<float>{0.0f, 1.0f / 6.0f, 2.0f / 6.0f, 0.5f}));
  const Array mean = run_mapped(4, [](const auto& a) { return pmean(a[0], "data"); }, {x});
  EXPECT_EQ(mean.dtype(), DType::f32);  // int / int is true division
  EXPECT_EQ(mean.to_floats(), (std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f}));
  const Array gathered = run_mapped(4, [](const auto& a) { return all_gather(a[0], "data"); }, {x});
  EXPECT_EQ(gathered.shape(), (Shape{4, 4}));
  EXPECT_EQ(gathered.to_ints(),
            (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  const Array index = run_mapped(4, [](const auto&) { return axis_index("data"); }, {x});
  EXPECT_EQ(index.dtype(), DType::i32);
  EXPECT_EQ(index.to_ints(), (std::vector<int64_t>{0, 1, 2, 3}));
  // x = np.arange(16).reshape(4, 4):
  //   psum_scatter(x, 'i')             -> [24 28 32 36]
  //   psum_scatter(x, 'i', tiled=True) -> [[24] [28] [32] [36]]
  std::vector<int32_t> sixteen(16);
  for (int32_t i = 0; i < 16; ++i) sixteen[static_cast<size_t>(i)] = i;
  const Array square = Array::from_ints({4, 4}, sixteen);
  const Array scattered =
      run_mapped(4, [](const auto& a) { return psum_scatter(a[0], "data"); }, {square});
  EXPECT_EQ(scattered.shape(), (Shape{4}));
  EXPECT_EQ(scattered.to_ints(), (std::vector<int64_t>{24, 28, 32, 36}));
  const Array tiled =
      run_mapped(4, [](const auto& a) { return psum_scatter(a[0], "data", 0, true); }, {square});
  EXPECT_EQ(tiled.shape(), (Shape{4, 1}));
  EXPECT_EQ(tiled.to_ints(), (std::vector<int64_t>{24, 28, 32, 36}));
}

TEST(CollectivesPmap, AllGatherPpermuteAxisIndexAxisSize) {
  for (int n : {1, 2, 3, 4, 7, 8}) {
    const size_t num_devices = static_cast<size_t>(n);
    const Array x = device_rows(num_devices, 2);  // [N, 2]
    const std::vector<float> rows = x.to_floats();
    // all_gather: every device gets x itself: [N, N, 2].
    const Array gathered =
        run_mapped(n, [](const auto& a) { return all_gather(a[0], "data"); }, {x});
    ASSERT_EQ(gathered.shape(), (Shape{n, n, 2}));
    std::vector<float> expected;
    for (size_t d = 0; d < num_devices; ++d)
      expected.insert(expected.end(), rows.begin(), rows.end());
    EXPECT_EQ(gathered.to_floats(), expected) << n << " devices";
    // ppermute ring shift: device (d + 1) % N gets row d.
    std::vector<std::pair<int64_t, int64_t>> ring;
    for (int64_t d = 0; d < n; ++d) ring.emplace_back(d, (d + 1) % n);
    const Array shifted =
        run_mapped(n, [ring](const auto& a) { return ppermute(a[0], "data", ring); }, {x});
    const std::vector<float> got = shifted.to_floats();
    for (size_t d = 0; d < num_devices; ++d) {
      const size_t receiver = (d + 1) % num_devices;
      EXPECT_EQ(got[receiver * 2], rows[d * 2]) << n << " devices";
      EXPECT_EQ(got[receiver * 2 + 1], rows[d * 2 + 1]) << n << " devices";
    }
    // axis_index and axis_size, used in arithmetic.
    const Array index = run_mapped(n,
                                   [](const auto&) {
                                     return astype(axis_index("data"), DType::f32) * 10.0 +
                                            static_cast<double>(axis_size("data"));
                                   },
                                   {x});
    std::vector<float> index_expected;
    for (int d = 0; d < n; ++d) index_expected.push_back(static_cast<float>(10 * d + n));
    EXPECT_EQ(index.to_floats(), index_expected);
  }
}

TEST(CollectivesPmap, PytreePsumIsOneReductionInTheProgramAndCorrect) {
  Pmapped f =
      pmap([](const std::vector<Tree>& args) { return pmean(args[0], "data"); }, on_devices(2));
  // grads = {'b': [2, 3], 'w': [2, 2, 2]} stacked over 2 devices.
  Tree grads = Tree::dict({{"b", device_rows(2, 3)}, {"w", reshape(device_rows(2, 4), {2, 2, 2})}});
  const std::string program = f.program_text({grads});
  EXPECT_EQ(count_of(program, "psum["), 1u) << program;
  EXPECT_THAT(program, HasSubstr("psum[axes=('data',) axis_name=data axis_size=2]")) << program;
  Tree out = f({grads});
  EXPECT_EQ(out["b"].leaf().shape(), (Shape{2, 3}));
  // b rows: device 0 [-5, -2, 1], device 1 [2, 5, -3] -> mean [-1.5, 1.5, -1].
  EXPECT_EQ(out["b"].leaf().to_floats(), (std::vector<float>{-1.5f, 1.5f, -1, -1.5f, 1.5f, -1}));
  EXPECT_EQ(f.last_execution().num_collectives, 1);
}

TEST(CollectivesPmap, UnboundAxisNameIsPitfallP1) {
  // pmap(axis_name='batch') but psum(..., axis_name='devices').
  Pmapped f =
      pmap([](const std::vector<Tree>& args) { return Tree(psum(args[0].leaf(), "devices")); },
           on_devices(4, "batch"));
  expect_error_mentions(
      [&] { f({device_rows(4, 2)}); },
      {"Found an unbound axis name: devices", "raised by psum",
       "names bound here are ['batch']"});
}

TEST(CollectivesPmap, PsumIsBitwiseReproducibleAndInDeviceOrder) {
  // Irregular f32 values on 8 devices: two runs give the same bits, equal to a left fold over
  // devices in f32, on every device.
  const size_t num_devices = 8;
  const size_t num_columns = 1001;
  std::vector<float> values(num_devices * num_columns);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(std::sin(0.91 * static_cast<double>(i)) *
                                   std::pow(10.0, static_cast<double>(i % 9) - 4));
  }
  const Array x = Array::from_floats({8, static_cast<int64_t>(num_columns)}, values);
  auto summed = [&] {
    return run_mapped(8, [](const auto& a) { return psum(a[0], "data"); }, {x}).to_floats();
  };
  const std::vector<float> first = summed();
  const std::vector<float> second = summed();
  std::vector<float> fold(num_columns);
  for (size_t k = 0; k < num_columns; ++k) {
    fold[k] = values[k];
    for (size_t d = 1; d < num_devices; ++d) fold[k] += values[d * num_columns + k];
  }
  ASSERT_EQ(first.size(), num_devices * num_columns);
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
  for (size_t d = 0; d < num_devices; ++d) {
    EXPECT_EQ(std::memcmp(first.data() + d * num_columns, fold.data(), num_columns * sizeof(float)),
              0)
        << "device " << d;
  }
}

// --- gradients ---
//
// Under pmap, JAX's transpose rules make the gradient a device computes for its own loss L_d
// equal to the derivative of the *total* S = sum_d L_d with respect to that device's input:
// psum's transpose sums the devices' cotangents, all_gather's scatters them back, ppermute's
// sends them back. So the check is: grad inside the mapped function (stacked over devices)
// against central differences of S as a function of the whole stacked input, in f64.

// loss(x_d, w_d) -> scalar, traced per device; w is a mapped, non-differentiated weight.
using MappedLoss = std::function<Array(const Array& x, const Array& w)>;

void expect_mapped_gradients_match_finite_differences(int num_devices, const MappedLoss& loss,
                                                      const Array& x, const Array& w) {
  TreeFunction per_device = [loss](const std::vector<Tree>& args) {
    return Tree(loss(args[0].leaf(), args[1].leaf()));
  };
  Pmapped gradients = pmap(grad(per_device, {0}), on_devices(num_devices));
  Pmapped losses = pmap(per_device, on_devices(num_devices));
  const std::vector<double> analytic = gradients({x, w}).leaf().to_doubles();
  const std::vector<double> values = x.to_doubles();
  ASSERT_EQ(analytic.size(), values.size());
  auto total = [&](const std::vector<double>& at) {
    double s = 0;
    for (double l : losses({Array::from_doubles(x.shape(), at), w}).leaf().to_doubles()) s += l;
    return s;
  };
  double scale = 1.0;
  for (double g : analytic) scale = std::max(scale, std::abs(g));
  const double h = 1e-6;
  for (size_t j = 0; j < values.size(); ++j) {
    std::vector<double> up = values, down = values;
    up[j] += h;
    down[j] -= h;
    const double numeric = (total(up) - total(down)) / (2 * h);
    EXPECT_NEAR(analytic[j], numeric, 1e-6 * scale)
        << "element " << j << " of " << shape_to_string(x.shape());
  }
}

// Irregular f64 values of a stacked [N, ...] input.
Array mapped_input(int num_devices, const Shape& per_device, double seed) {
  Shape shape = per_device;
  shape.insert(shape.begin(), num_devices);
  return pmap_engine::testing::irregular(shape, seed);
}

TEST(CollectivesPmap, GradientsOfEveryDifferentiableCollectiveMatchFiniteDifferences) {
  for (int n : {1, 3, 4}) {
    SCOPED_TRACE(std::to_string(n) + " devices");
    // psum, element-wise then nonlinear: x_d, w_d: [3].
    expect_mapped_gradients_match_finite_differences(
        n, [](const Array& x, const Array& w) { return sum(w * tanh(psum(x, "data"))); },
        mapped_input(n, {3}, 0.1), mapped_input(n, {3}, 0.2));
    // pmean.
    expect_mapped_gradients_match_finite_differences(
        n, [](const Array& x, const Array& w) { return sum(w * square(pmean(x, "data"))); },
        mapped_input(n, {3}, 0.3), mapped_input(n, {3}, 0.4));
    // psum of a pytree: one reduction over (x, x^2).
    expect_mapped_gradients_match_finite_differences(
        n,
        [](const Array& x, const Array& w) {
          Tree both = psum(Tree::tuple({x, square(x)}), "data");
          return sum(w * tanh(both[0].leaf())) + sum(w * both[1].leaf());
        },
        mapped_input(n, {3}, 0.5), mapped_input(n, {3}, 0.6));
    // all_gather stacked at axis 1: x_d [2, 3] -> [2, N, 3]; w_d like the result.
    expect_mapped_gradients_match_finite_differences(
        n, [](const Array& x, const Array& w) { return sum(w * tanh(all_gather(x, "data", 1))); },
        mapped_input(n, {2, 3}, 0.7), mapped_input(n, {2, n, 3}, 0.8));
    // all_gather tiled at axis 0: x_d [2, 3] -> [2N, 3].
    expect_mapped_gradients_match_finite_differences(
        n,
        [](const Array& x, const Array& w) {
          return sum(w * square(all_gather(x, "data", 0, true)));
        },
        mapped_input(n, {2, 3}, 0.9), mapped_input(n, {2 * n, 3}, 1.0));
    // psum_scatter untiled at dimension 1: x_d [2, N] -> [2].
    expect_mapped_gradients_match_finite_differences(
        n, [](const Array& x, const Array& w) { return sum(w * tanh(psum_scatter(x, "data", 1))); },
        mapped_input(n, {2, n}, 1.1), mapped_input(n, {2}, 1.2));
    // psum_scatter tiled at dimension 0: x_d [2N, 3] -> [2, 3].
    expect_mapped_gradients_match_finite_differences(
        n,
        [](const Array& x, const Array& w) {
          return sum(w * square(psum_scatter(x, "data", 0, true)));
        },
        mapped_input(n, {2 * n, 3}, 1.3), mapped_input(n, {2, 3}, 1.4));
    // ppermute: a ring shift, and a partial permutation (devices nobody sends to get zeros, and
    // values nobody receives get no gradient).
    std::vector<std::pair<int64_t, int64_t>> ring, partial;
    for (int64_t d = 0; d < n; ++d) ring.emplace_back(d, (d + 1) % n);
    partial.emplace_back(n - 1, 0);
    for (const auto& perm : {ring, partial}) {
      expect_mapped_gradients_match_finite_differences(
          n,
          [perm](const Array& x, const Array& w) {
            return sum(w * tanh(ppermute(x, "data", perm))) + 0.5 * sum(square(x));
          },
          mapped_input(n, {3}, 1.5), mapped_input(n, {3}, 1.6));
    }
    // axis_index as a (non-differentiable) coefficient.
    expect_mapped_gradients_match_finite_differences(
        n,
        [](const Array& x, const Array& w) {
          return sum(w * x * (astype(axis_index("data"), DType::f64) + 1.0));
        },
        mapped_input(n, {3}, 1.7), mapped_input(n, {3}, 1.8));
  }
}

TEST(CollectivesPmap, GradOfAPsummedLossIsNTimesThePerDeviceGradientPitfallP3) {
  // jax.grad(lambda x: psum(sum(x ** 2), 'i')) under pmap gives 2 x N: psum's transpose is a
  // psum of the cotangent 1 over N devices. Integer inputs keep it exact.
  for (int n : {1, 2, 3, 4, 7, 8}) {
    const Array x = astype(device_rows(static_cast<size_t>(n), 3), DType::f64);
    TreeFunction psummed = [](const std::vector<Tree>& args) {
      return Tree(psum(sum(square(args[0].leaf())), "data"));
    };
    TreeFunction averaged = [](const std::vector<Tree>& args) {
      return Tree(pmean(sum(square(args[0].leaf())), "data"));
    };
    const std::vector<double> values = x.to_doubles();
    const std::vector<double> scaled = pmap(grad(psummed), on_devices(n))({x}).leaf().to_doubles();
    const std::vector<double> plain = pmap(grad(averaged), on_devices(n))({x}).leaf().to_doubles();
    for (size_t j = 0; j < values.size(); ++j) {
      EXPECT_EQ(scaled[j], 2 * values[j] * n) << n << " devices, element " << j;
      // pmean's transpose: psum of 1/N over N devices, ~1 (exact for powers of two).
      EXPECT_NEAR(plain[j], 2 * values[j], 1e-12) << n << " devices, element " << j;
    }
  }
}

TEST(CollectivesPmap, WorkInsideJitInsidePmapAndUnderDisableJit) {
  const Array x = device_rows(3, 2);
  const std::vector<float> expected =
      run_mapped(3, [](const auto& a) { return psum(a[0], "data"); }, {x}).to_floats();
  Jitted inner =
      jit([](const std::vector<Tree>& args) { return Tree(psum(args[0].leaf(), "data")); });
  Pmapped outer =
      pmap([inner](const std::vector<Tree>& args) { return inner(args); }, on_devices(3));
  EXPECT_EQ(outer({x}).leaf().to_floats(), expected);
  DisableJit op_by_op;
  EXPECT_EQ(run_mapped(3, [](const auto& a) { return psum(a[0], "data"); }, {x}).to_floats(),
            expected);
}

TEST(CollectivesPmap, GradThroughPmaxRaisesAsInJax) {
  TreeFunction loss = [](const std::vector<Tree>& args) {
    return Tree(sum(pmax(args[0].leaf(), "data")));
  };
  Pmapped f = pmap(grad(loss), on_devices(2));
  expect_error_mentions([&] { f({device_rows(2, 3)}); },
                        {"Differentiation rule for 'pmax' not implemented"});
}

}  // namespace
}  // namespace pmap_engine
