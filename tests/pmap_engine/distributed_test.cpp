// pmap across processes (pmap_engine/distributed.h): two real processes of four devices each,
// joined through a coordinator on a loopback port, run every collective and give each device
// exactly the outputs one process of eight devices gives it (the same kernels fold the same
// operands in global device order). Expected values come from that one-process run.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "command.h"
#include "distributed_program.h"
#include "parity/common/loopback_port.h"
#include "test_files.h"

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;

std::vector<double> read_doubles(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  std::vector<double> values(static_cast<size_t>(in.tellg()) / sizeof(double));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()),
          static_cast<std::streamsize>(values.size() * sizeof(double)));
  return values;
}

// The outputs of devices [first, first + count) of the 8-device run, flattened as a worker
// flattens its own: each leaf's local rows in leaf order. Every output has the device axis
// first, so a device's rows are a contiguous block of each leaf.
std::vector<double> local_part(const Tree& all, int64_t first, int64_t count) {
  std::vector<double> out;
  for (const Array& leaf : all.leaves()) {
    const std::vector<double> values = leaf.to_doubles();
    const size_t per_device = values.size() / 8;
    out.insert(out.end(), values.begin() + static_cast<std::ptrdiff_t>(first * per_device),
               values.begin() + static_cast<std::ptrdiff_t>((first + count) * per_device));
  }
  return out;
}

std::string loopback_coordinator() {
  return fmt::format("127.0.0.1:{}", parity::free_loopback_port());
}

std::string worker_command(const std::string& coordinator, int process, int local,
                           const std::filesystem::path& out) {
  return fmt::format("{} {} {} 2 {} {}", PARITY_DISTRIBUTED_WORKER, coordinator, process, local,
                     out.string());
}

// Processes 0 and 1 of a two-process run with `local0` and `local1` devices, writing p0 and
// p1 in `dir`; exit 0 when both did.
parity::testing::CommandResult run_two_workers(const parity::testing::TempDir& dir, int local0,
                                               int local1) {
  const std::string coordinator = loopback_coordinator();
  return parity::testing::run_command(
      worker_command(coordinator, 0, local0, dir.path("p0")) + " & first=$!; " +
          worker_command(coordinator, 1, local1, dir.path("p1")) +
          " & second=$!; wait $first; a=$?; wait $second; exit $((a | $?))",
      120);
}

TEST(DistributedPmap, TwoProcessesOfFourDevicesComputeWhatOneProcessOfEightDoes) {
  parity::testing::TempDir dir;
  const auto result = run_two_workers(dir, 4, 4);
  ASSERT_EQ(result.exit_code, 0) << result.output;

  const Tree one_process =
      testing::collectives_program(8, testing::device_inputs(0, 8), DeviceSet(8));
  EXPECT_EQ(read_doubles(dir.path("p0")), local_part(one_process, 0, 4));
  EXPECT_EQ(read_doubles(dir.path("p1")), local_part(one_process, 4, 4));
}

TEST(DistributedPmap, AProcessWhoseCoordinatorNeverAnswersNamesItAndTimesOut) {
  parity::testing::TempDir dir;
  // Process 1 alone, with a 2 s timeout: nobody serves the coordinator.
  const std::string coordinator = loopback_coordinator();
  const auto result =
      parity::testing::run_command(worker_command(coordinator, 1, 4, dir.path("p1")) + " 2", 120);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("no coordinator answered at " + coordinator +
                                       " within 2 s; start process 0"));
}

TEST(DistributedPmap, ProcessesWithDifferentDeviceCountsAreRefused) {
  parity::testing::TempDir dir;
  const auto result = run_two_workers(dir, 4, 3);
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("every process must see the same number of devices"));
}

}  // namespace
}  // namespace pmap_engine
