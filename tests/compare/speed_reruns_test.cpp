// The gate's speed reruns as independent measurements: a run given twice, under another path or
// as a copy, and a rerun of another case or producer, are refused naming them.
#include "parity/compare/speed_reruns.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_files.h"

namespace parity::compare {
namespace {

// A finished run in memory, told apart from others by its start and its step times.
RunDir run(const std::string& dir, const std::string& producer, const std::string& started_at) {
  RunDir run;
  run.dir = dir;
  run.info.producer = producer;
  run.info.case_name = "mlp2-fmnist";
  run.info.case_hash = "c3306ffd74f61211";
  run.info.host = "ci-runner";
  run.info.started_at = started_at;
  for (int64_t step = 0; step < 3; ++step) {
    StepMetrics metrics;
    metrics.step = step;
    metrics.step_seconds = 0.01;
    run.steps.push_back(metrics);
  }
  return run;
}

TEST(SpeedReruns, DistinctRunsOfEachSidesCaseAndProducerAreAccepted) {
  const RunDir baseline = run("/runs/base", "ddp_ref", "2026-12-07T08:00:00Z");
  const RunDir candidate = run("/runs/cand", "pmap_engine", "2026-12-07T08:00:01Z");
  check_speed_reruns({run("/runs/b0", "ddp_ref", "2026-12-07T08:01:00Z"),
                      run("/runs/b1", "ddp_ref", "2026-12-07T08:03:00Z")},
                     baseline,
                     {run("/runs/c0", "pmap_engine", "2026-12-07T08:02:00Z"),
                      run("/runs/c1", "pmap_engine", "2026-12-07T08:04:00Z")},
                     candidate);
}

TEST(SpeedReruns, OneRunCountedTwiceIsRefused) {
  const RunDir baseline = run("/runs/base", "ddp_ref", "2026-12-07T08:00:00Z");
  const RunDir candidate = run("/runs/cand", "ddp_ref", "2026-12-07T08:00:01Z");
  const RunDir b0 = run("/runs/b0", "ddp_ref", "2026-12-07T08:01:00Z");
  const RunDir c0 = run("/runs/c0", "ddp_ref", "2026-12-07T08:02:00Z");
  testing::expect_input_error(
      [&] {
        check_speed_reruns({b0, run("/runs/x/../b0", "ddp_ref", "other")}, baseline, {c0, c0},
                           candidate);
      },
      {"speed rerun /runs/x/../b0 is given twice (also as /runs/b0)"});
  RunDir copy = b0;
  copy.dir = "/runs/b0-copy";
  testing::expect_input_error(
      [&] { check_speed_reruns({b0}, baseline, {copy}, candidate); },
      {"speed reruns /runs/b0 and /runs/b0-copy are copies of one run (the same start "
       "2026-12-07T08:01:00Z, host ci-runner and step metrics)"});
}

TEST(SpeedReruns, ARerunOfAnotherCaseOrProducerIsRefused) {
  const RunDir baseline = run("/runs/base", "ddp_ref", "2026-12-07T08:00:00Z");
  const RunDir candidate = run("/runs/cand", "pmap_engine", "2026-12-07T08:00:01Z");
  RunDir other_case = run("/runs/b0", "ddp_ref", "2026-12-07T08:01:00Z");
  other_case.info.case_hash = "0000000000000001";
  const RunDir c0 = run("/runs/c0", "pmap_engine", "2026-12-07T08:02:00Z");
  testing::expect_input_error([&] { check_speed_reruns({other_case}, baseline, {c0}, candidate); },
                              {"baseline rerun /runs/b0 trained case mlp2-fmnist (hash "
                               "0000000000000001), the baseline /runs/base (hash "
                               "c3306ffd74f61211)"});
  testing::expect_input_error(
      [&] {
        check_speed_reruns({run("/runs/b0", "ddp_ref", "2026-12-07T08:01:00Z")}, baseline,
                           {run("/runs/c0", "ddp_ref", "2026-12-07T08:02:00Z")}, candidate);
      },
      {"candidate rerun /runs/c0 was made by ddp_ref, the candidate /runs/cand by pmap_engine"});
}

}  // namespace
}  // namespace parity::compare
