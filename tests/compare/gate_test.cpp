// The regression gate (compare/gate.h) on real ddp_ref runs of the small case: a calibration
// from reruns, gate.json kept per platform, candidates changed in one thing each (a loss a hair
// off, slower steps, more memory) judged by the calibrated gate and by the thresholds, and the
// throughput interval from the runs' own steps or from interleaved reruns.
#include "parity/compare/gate.h"
#include "parity/compare/speed_verdict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "real_runs.h"
#include "result_lookup.h"
#include "test_files.h"

namespace parity::compare {
namespace {

namespace fs = std::filesystem;
using testing::copy_run;
using testing::ddp_run;
using testing::edit_metrics;
using testing::edit_run_json;
using ::testing::HasSubstr;

// A rerun of the baseline's case: ddp_ref run twice in one build is bit-identical
// (ranks as threads, one Gloo ring order), so the calibration sees no numeric deviation.
fs::path ddp_rerun() { return testing::shared_run("ddp-rerun", "ddp"); }

CheckStatus status_of(const ComparisonResult& result, const std::string& id) {
  return testing::find_check(result, id).status;
}

TEST(Gate, ReproducingRerunsCalibrateAnExactGateWithThresholdsAsFloors) {
  const RunDir baseline = read_run_dir(ddp_run());
  const Calibration calibration =
      calibrate(baseline, {read_run_dir(ddp_rerun())}, 2, GateThresholds{0.05, 0.10});
  EXPECT_EQ(calibration.producer, "ddp_ref");
  EXPECT_EQ(calibration.reruns, 1);
  EXPECT_EQ(calibration.loss_max_abs, 0);
  EXPECT_EQ(calibration.tensor_max_abs, 0);
  EXPECT_EQ(calibration.loss_atol, 0);
  EXPECT_EQ(calibration.tensor_atol, 0);
  // The counting allocator's peaks move by a few hundred bytes between thread-rank runs.
  EXPECT_LT(calibration.memory_growth, 1e-3);
  EXPECT_EQ(calibration.max_memory_growth, std::max(0.10, 2 * calibration.memory_growth));
  // Throughput noise scaled by the margin, never below the threshold given.
  EXPECT_EQ(calibration.max_throughput_drop, std::max(0.05, 2 * calibration.throughput_drop));
  EXPECT_EQ(calibration.platform, current_platform());
}

TEST(Gate, ACalibratedGateFailsALossOneUlpOffThatTheDefaultTolerancePasses) {
  testing::TempDir dir;
  const fs::path candidate = copy_run(ddp_rerun(), dir.path("candidate"));
  edit_metrics(candidate, 5, [](nlohmann::json& metrics) {
    metrics["loss"] = std::nextafter(metrics["loss"].get<double>(), 10.0);
  });
  const RunDir baseline = read_run_dir(ddp_run());
  const RunDir run = read_run_dir(candidate);
  const Calibration calibration = calibrate(baseline, {read_run_dir(ddp_rerun())}, 2, {});
  // Performance checks set aside: this test is about the numbers.
  GateThresholds loose{1.0, 100.0};
  const ComparisonResult calibrated = compare_runs(run, baseline, gate_options(loose, calibration));
  EXPECT_EQ(status_of(calibrated, "loss_curve"), CheckStatus::kFail);
  EXPECT_EQ(calibrated.verdict, Verdict::kNotEquivalent);
  const ComparisonResult uncalibrated =
      compare_runs(run, baseline, gate_options(loose, std::nullopt));
  EXPECT_EQ(status_of(uncalibrated, "loss_curve"), CheckStatus::kPass);
}

// Sets every step's step_seconds of `run`: 10 ms x `factor`, each step 0.2% apart from the
// next of three, so that the interval of the median ratio is narrow and its answer known.
void set_step_times(const fs::path& run, double factor, double spread = 0.002) {
  for (int64_t step = 0; step < 10; ++step) {
    edit_metrics(run, step, [&](nlohmann::json& metrics) {
      metrics["step_seconds"] = 0.01 * factor * (1 + spread * static_cast<double>(step % 3));
    });
  }
}

// `options` judging speed from `pairs` interleaved pairs: copies of `baseline`'s and
// `candidate`'s steady step times.
CompareOptions with_speed_pairs(CompareOptions options, const fs::path& baseline,
                                const fs::path& candidate, int64_t pairs) {
  options.speed->b.assign(pairs, steady_step_times(read_run_dir(baseline)));
  options.speed->a.assign(pairs, steady_step_times(read_run_dir(candidate)));
  return options;
}

// The gate judges throughput by the interval of the step-time quantile ratio from metrics.jsonl
// (speed_verdict.h), no longer by run.json's two medians; one pair never fails.
TEST(Gate, ThroughputAndMemoryPastTheirThresholdsFail) {
  testing::TempDir dir;
  const fs::path baseline_dir = copy_run(ddp_run(), dir.path("baseline"));
  set_step_times(baseline_dir, 1);
  const RunDir baseline = read_run_dir(baseline_dir);
  const fs::path slower = copy_run(ddp_run(), dir.path("slower"));
  // 6% fewer samples/s: every step time x 1/0.94.
  set_step_times(slower, 1 / 0.94);
  const ComparisonResult at_5 = compare_runs(
      read_run_dir(slower), baseline,
      with_speed_pairs(gate_options({0.05, 0.10}, std::nullopt), baseline_dir, slower, 3));
  EXPECT_EQ(status_of(at_5, "throughput"), CheckStatus::kFail);
  EXPECT_THAT(testing::find_check(at_5, "throughput").summary,
              HasSubstr("below the 0.95x failure threshold"));
  ASSERT_TRUE(at_5.speed.has_value());
  EXPECT_NEAR(at_5.speed->throughput_ratio, 0.94, 1e-12);
  EXPECT_LT(at_5.speed->high, 0.95);
  EXPECT_EQ(at_5.speed->pairs, 3);
  EXPECT_EQ(at_5.speed->candidate_steps, 27);  // each run's first step, its warm-up, left out
  EXPECT_EQ(at_5.verdict, Verdict::kNotEquivalent);
  const ComparisonResult at_7 = compare_runs(
      read_run_dir(slower), baseline,
      with_speed_pairs(gate_options({0.07, 0.10}, std::nullopt), baseline_dir, slower, 3));
  EXPECT_EQ(status_of(at_7, "throughput"), CheckStatus::kPass);
  EXPECT_GE(at_7.speed->low, 0.93);

  // The two runs alone, one pair: below the threshold, but no failure: rerun.
  const ComparisonResult one_pair =
      compare_runs(read_run_dir(slower), baseline, gate_options({0.05, 0.10}, std::nullopt));
  EXPECT_EQ(one_pair.speed->pairs, 1);
  EXPECT_LT(one_pair.speed->high, 0.95);
  EXPECT_EQ(status_of(one_pair, "throughput"), CheckStatus::kWarn);
  EXPECT_THAT(testing::find_check(one_pair, "throughput").summary,
              HasSubstr("1 pair(s) of runs cannot tell a slower candidate from a slower moment"));
  EXPECT_EQ(one_pair.verdict, Verdict::kInconclusive);

  const fs::path larger = copy_run(ddp_run(), dir.path("larger"));
  edit_run_json(larger, [](nlohmann::json& info) {
    for (auto& peak : info["memory"]["peak_bytes_per_replica"]) {
      peak = static_cast<int64_t>(static_cast<double>(peak.get<int64_t>()) * 1.2);
    }
  });
  const ComparisonResult grown =
      compare_runs(read_run_dir(larger), baseline, gate_options({1.0, 0.10}, std::nullopt));
  EXPECT_EQ(status_of(grown, "memory"), CheckStatus::kFail);
  EXPECT_EQ(grown.verdict, Verdict::kNotEquivalent);
}

TEST(Gate, AThroughputIntervalAcrossTheThresholdIsInconclusive) {
  testing::TempDir dir;
  const fs::path baseline = copy_run(ddp_run(), dir.path("baseline"));
  set_step_times(baseline, 1, 0.3);
  const fs::path candidate = copy_run(ddp_run(), dir.path("candidate"));
  // Its median ratio right at the 0.95 threshold, its steps 30% apart: no telling.
  set_step_times(candidate, 1 / 0.95, 0.3);
  const ComparisonResult result = compare_runs(read_run_dir(candidate), read_run_dir(baseline),
                                               gate_options({0.05, 0.10}, std::nullopt));
  ASSERT_TRUE(result.speed.has_value());
  EXPECT_EQ(result.speed->verdict, "inconclusive");
  EXPECT_LT(result.speed->low, 0.95);
  EXPECT_GT(result.speed->high, 0.95);
  EXPECT_EQ(status_of(result, "throughput"), CheckStatus::kWarn);
  EXPECT_THAT(testing::find_check(result, "throughput").summary,
              HasSubstr("inconclusive, rerun with more repetitions"));
  EXPECT_EQ(result.verdict, Verdict::kInconclusive);
  EXPECT_EQ(exit_code(result.verdict), 5);
  EXPECT_THAT(result.headline, HasSubstr("Inconclusive, rerun with more repetitions"));
}

TEST(Gate, RunsWithoutStepTimesAreJudgedByTheirMediansAlone) {
  testing::TempDir dir;
  const RunDir baseline = read_run_dir(ddp_run());
  const fs::path candidate = copy_run(ddp_run(), dir.path("candidate"));
  for (int64_t step = 0; step < 10; ++step) {
    edit_metrics(candidate, step, [](nlohmann::json& metrics) { metrics["step_seconds"] = 0; });
  }
  edit_run_json(candidate, [&](nlohmann::json& info) {
    info["timings"]["steady_step_median_seconds"] =
        baseline.info.timings.steady_step_median_seconds / 0.94;
  });
  const ComparisonResult result = compare_runs(read_run_dir(candidate), baseline,
                                               gate_options({0.05, 0.10}, std::nullopt));
  EXPECT_FALSE(result.speed.has_value());
  EXPECT_EQ(status_of(result, "throughput"), CheckStatus::kFail);
  EXPECT_THAT(testing::find_check(result, "throughput").summary,
              HasSubstr("below the 0.95x failure threshold"));
}

// A calibration for this platform by `reruns` ddp_ref reruns, every number 0 until set.
Calibration calibration_here(int64_t reruns) {
  Calibration calibration;
  calibration.platform = current_platform();
  calibration.producer = "ddp_ref";
  calibration.reruns = reruns;
  return calibration;
}

TEST(Gate, CalibrationsAreKeptPerPlatformInGateJson) {
  testing::TempDir dir;
  Calibration here = calibration_here(3);
  here.loss_atol = 1e-7;
  here.max_throughput_drop = 0.08;
  Calibration elsewhere = here;
  elsewhere.platform = "Linux-aarch64, another CPU, 64 hardware threads";
  elsewhere.loss_atol = 3e-7;
  write_calibration(dir.path(), elsewhere);
  write_calibration(dir.path(), here);
  here.reruns = 5;  // a recalibration replaces this platform's entry only
  write_calibration(dir.path(), here);
  const auto calibrations = read_calibrations(dir.path());
  ASSERT_EQ(calibrations.size(), 2u);
  EXPECT_EQ(calibrations.at(current_platform()).reruns, 5);
  EXPECT_EQ(calibrations.at(current_platform()).loss_atol, 1e-7);
  EXPECT_EQ(calibrations.at(elsewhere.platform).loss_atol, 3e-7);
}

TEST(Gate, AMalformedGateJsonIsRefusedWithTheFileAndTheFix) {
  testing::TempDir dir;
  std::ofstream(dir.path("gate.json")) << R"({"format": "parity-gate", "schema_version": 1,
    "calibrations": {"p": {"producer": "ddp_ref", "reruns": 2}}})";
  testing::expect_input_error([&] { read_calibrations(dir.path()); },
                              {"gate.json", "'p'", "lacks \"margin\"", "--calibrate"});
  std::ofstream(dir.path("gate.json"), std::ios::trunc) << "{\"format\": \"other\"}";
  testing::expect_input_error([&] { read_calibrations(dir.path()); },
                              {"gate.json", "not a parity gate file"});
}

TEST(Gate, NonFiniteTolerancesAreNeverWrittenAndAskForARecalibrationWhenRead) {
  testing::TempDir dir;
  Calibration calibration = calibration_here(1);
  calibration.loss_atol = std::nan("");  // what --margin nan produced before it was refused
  testing::expect_input_error([&] { write_calibration(dir.path(), calibration); },
                              {"gate.json", "not written", "tolerances.loss_atol = nan",
                               "finite --margin"});
  EXPECT_FALSE(fs::exists(dir.path("gate.json")));

  // A gate.json an older parity wrote that way: nlohmann wrote the NaN as null.
  std::ofstream(dir.path("gate.json")) << R"({"format": "parity-gate", "schema_version": 1,
    "calibrations": {"p": {"producer": "ddp_ref", "reruns": 1, "margin": 2,
      "calibrated_at": "2026-12-04T00:00:00Z",
      "observed": {"loss_max_abs": 0, "tensor_max_abs": 0, "throughput_drop": 0,
                   "memory_growth": 0},
      "tolerances": {"loss_atol": null, "tensor_atol": 0, "max_throughput_drop": 0.05,
                     "max_memory_growth": 0.1}}}})";
  testing::expect_input_error(
      [&] { read_calibrations(dir.path()); },
      {"gate.json", "'p'", "\"tolerances.loss_atol\": null, not a finite number",
       "recalibrate with parity gate --calibrate N"});
}

TEST(Gate, ANonFiniteMarginIsRefused) {
  const RunDir baseline = read_run_dir(ddp_run());
  for (const double margin : {std::nan(""), HUGE_VAL, 0.5}) {
    testing::expect_input_error(
        [&] { calibrate(baseline, {read_run_dir(ddp_rerun())}, margin, {}); },
        {"calibration margin", "expected a finite number >= 1"});
  }
}

TEST(Gate, TheCliCalibratesAndThenPassesAReproducingRun) {
  testing::TempDir dir;
  const fs::path baseline = copy_run(ddp_run(), dir.path("baseline"));
  auto result = testing::run_command(
      fmt::format("{} gate --baseline {} --calibrate 1", PARITY_EXECUTABLE, baseline.string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("observed: loss |A - B| <= 0, tensors |A - B| <= 0"));
  EXPECT_TRUE(fs::exists(baseline / "gate.json"));
  EXPECT_TRUE(fs::exists(dir.path("baseline.calibration/rerun-0/run.json")));
  // Throughput is set aside (--max-throughput-drop 100): two runs on a shared machine differ in
  // speed by more than any fixed threshold a test could assume.
  result = testing::run_command(
      fmt::format("{} gate --baseline {} --candidate {} --max-throughput-drop 100 --no-color",
                  PARITY_EXECUTABLE, baseline.string(), ddp_rerun().string()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("calibrated for " + current_platform()));
  EXPECT_THAT(result.output, HasSubstr("gate:     loss atol 0, tensor atol 0"));
}

TEST(Gate, TheCliJudgesThroughputFromInterleavedReruns) {
  testing::TempDir dir;
  const fs::path report = dir.path("report");
  // Any ratio passes a 100% drop: this test is about the reruns, not this machine's speed.
  const auto result = testing::run_command(fmt::format(
      "{} gate --baseline {} --candidate {} --speed-reruns 2 --work {} --max-throughput-drop 100 "
      "--report {} --no-color",
      PARITY_EXECUTABLE, ddp_run().string(), ddp_rerun().string(), dir.path("speed").string(),
      report.string()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("speed pair 2 of 2: the candidate's case"));
  for (const char* run : {"baseline-0", "candidate-0", "baseline-1", "candidate-1"}) {
    EXPECT_TRUE(fs::exists(dir.path("speed") / run / "run.json")) << run;
  }
  const nlohmann::json speed =
      nlohmann::json::parse(std::ifstream(report / "report.json")).at("speed");
  EXPECT_EQ(speed.at("pairs"), 2);
  EXPECT_EQ(speed.at("candidate_steps"), 18);
  EXPECT_EQ(speed.at("verdict"), "pass");
  EXPECT_LE(speed.at("low").get<double>(), speed.at("high").get<double>());
}

TEST(Gate, SpeedRerunsMadeElsewhereMustPairUpAndBeOfTheCase) {
  const auto unpaired = testing::run_command(fmt::format(
      "{} gate --baseline {} --candidate {} --speed-baseline {} {} --speed-candidate {}",
      PARITY_EXECUTABLE, ddp_run().string(), ddp_rerun().string(), ddp_run().string(),
      ddp_rerun().string(), ddp_rerun().string()));
  EXPECT_EQ(unpaired.exit_code, 2) << unpaired.output;
  EXPECT_THAT(unpaired.output, HasSubstr("--speed-baseline gives 2 run(s), --speed-candidate 1"));
  const auto other_case = testing::run_command(fmt::format(
      "{} gate --baseline {} --candidate {} --speed-baseline {} --speed-candidate {}",
      PARITY_EXECUTABLE, ddp_run().string(), ddp_rerun().string(), ddp_run().string(),
      testing::other_init_run().string()));
  EXPECT_EQ(other_case.exit_code, 2) << other_case.output;
  EXPECT_THAT(other_case.output, HasSubstr("speed reruns must be of the candidate's own case"));
}

TEST(Gate, AnImportedBaselineAsksForReruns) {
  testing::TempDir dir;
  const fs::path baseline = copy_run(ddp_run(), dir.path("baseline"));
  edit_run_json(baseline, [](nlohmann::json& info) { info["producer"] = "import:jsonl"; });
  const auto result = testing::run_command(
      fmt::format("{} gate --baseline {} --calibrate 2", PARITY_EXECUTABLE, baseline.string()));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("which parity cannot rerun"));
  EXPECT_THAT(result.output, HasSubstr("--reruns"));
}

}  // namespace
}  // namespace parity::compare
