// parity gate: a candidate run judged against a stored golden run (compare/gate.h).
//   parity gate --baseline DIR --candidate DIR       the gate; exit codes as compare's
//   parity gate --baseline DIR --calibrate N         N reruns of the baseline's case by the
//                                                    producer that made it, then gate.json
//   parity gate --baseline DIR --reruns DIR...       the same from reruns made elsewhere (a
//                                                    real PyTorch or JAX job, imported)
// Throughput is judged by the confidence interval of the step-time quantile ratio (q10)
// (compare/speed_verdict.h): from the two runs' steps, or from interleaved reruns of both,
// A B, B A, ... (--speed-reruns N, by the producers that made them; or --speed-baseline DIR...
// --speed-candidate DIR... made elsewhere). Exit 5 when the interval straddles the threshold,
// or lies below it from fewer than compare::kMinPairsToFail pairs.
#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "comparison_output.h"
#include "numeric_options.h"
#include "output_options.h"
#include "parity/common/error.h"
#include "parity/common/run_dir.h"
#include "parity/compare/gate.h"
#include "parity/compare/speed_reruns.h"
#include "parity/compare/speed_verdict.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "producer_processes.h"
#include "run_output.h"

namespace parity::cli {
namespace {

namespace fs = std::filesystem;

struct GateArguments {
  std::string baseline, candidate, report, work;
  int64_t calibrate = 0;
  std::vector<std::string> reruns;
  int64_t speed_reruns = 0;
  std::vector<std::string> speed_baseline, speed_candidate;
  double speed_confidence_percent = 95;
  double max_throughput_drop_percent = 5;
  double max_memory_growth_percent = 10;
  double margin = 2;
  bool no_color = false;
  bool overwrite = false;
};

// A run's case, from the canonical TOML its run.json records.
CaseSpec recorded_case(const RunDir& run, const fs::path& work) {
  if (run.info.case_toml.empty()) {
    throw InputError(fmt::format("{}: run.json records no case text, so the case cannot be rerun",
                                 run.dir.string()));
  }
  create_output_directory(work);
  const fs::path file = work / (run.info.case_name + ".toml");
  write_text_file_atomically(file, run.info.case_toml);
  CaseSpec spec = load_case(file.string());
  if (spec.hash() != run.info.case_hash) {
    throw InputError(fmt::format(
        "{}: its case text hashes to {} here, not to the {} it recorded (made by another "
        "parity version?); make it again",
        run.dir.string(), spec.hash(), run.info.case_hash));
  }
  return spec;
}

// A rerun writes WORK/rerun-N quietly, replacing what an earlier gate left there.
void set_rerun_options(ProducerOptions& options, const fs::path& init, const fs::path& out) {
  options.init_file = init;
  options.out_dir = out;
  options.overwrite = true;
  options.quiet = true;
}

// What reruns a run's case with the producer that made it (in as many processes as the case
// says), from the same initial parameters every time. `instead` says what to do for a run
// parity cannot rerun.
class CaseRerunner {
 public:
  CaseRerunner(const RunDir& run, const fs::path& work, const std::string& instead)
      : producer_(run.info.producer) {
    if (producer_ != "ddp_ref" && producer_ != "pmap_engine") {
      throw InputError(fmt::format("{} was made by {}, which parity cannot rerun; {}",
                                   run.dir.string(), producer_, instead));
    }
    spec_ = recorded_case(run, work);
    init_ = ensure_init_file(spec_, "", work);
  }

  // `what` names the rerun in the progress line ("rerun 1 of 3").
  RunDir rerun(const fs::path& out, const std::string& what) const {
    std::cerr << fmt::format("parity gate: {} ({}, case {}) -> {}\n", what, producer_,
                             spec_.name, out.string());
    if (producer_ == "ddp_ref") {
      ddp_ref::DdpOptions options;
      set_rerun_options(options, init_, out);
      ddp_ref::train(spec_, options);
    } else {
      engine_trainer::EngineOptions options;
      set_rerun_options(options, init_, out);
      options.step.program = spec_.scenario.engine_program;
      train_engine(spec_, options, spec_.parallel.processes);
    }
    return read_run_dir(out);
  }

 private:
  std::string producer_;
  CaseSpec spec_;
  fs::path init_;
};

// Reruns the baseline's case `count` times for a calibration.
std::vector<RunDir> rerun_baseline(const RunDir& baseline, int64_t count, const fs::path& work) {
  const CaseRerunner rerunner(
      baseline, work,
      fmt::format("run your job {} times, import each run (parity import metrics / tensors) and "
                  "pass them with --reruns",
                  count));
  std::vector<RunDir> reruns;
  for (int64_t i = 0; i < count; ++i) {
    reruns.push_back(rerunner.rerun(work / fmt::format("rerun-{}", i),
                                    fmt::format("rerun {} of {}", i + 1, count)));
  }
  return reruns;
}

// Each run's steady step times; InputError when one is incomplete (the speed of a run cut short
// is no speed of its case).
std::vector<std::vector<double>> step_times_of(const std::vector<RunDir>& runs, const char* side) {
  std::vector<std::vector<double>> times;
  for (const RunDir& run : runs) {
    if (run.info.status != "complete") {
      throw InputError(fmt::format("{} rerun {} is {} ({}); rerun it", side, run.dir.string(),
                                   run.info.status, run.info.failure));
    }
    times.push_back(compare::steady_step_times(run));
  }
  return times;
}

// The interleaved reruns the throughput verdict is judged from: `count` pairs made here, one
// run of the baseline's case and one of the candidate's after the other, so that both halves of
// a pair see the same machine; or the runs given by --speed-baseline / --speed-candidate.
compare::CompareOptions::SpeedRuns speed_runs(const GateArguments& arguments,
                                              const RunDir& baseline, const RunDir& candidate) {
  compare::CompareOptions::SpeedRuns runs;
  runs.confidence = arguments.speed_confidence_percent / 100;
  std::vector<RunDir> baseline_runs, candidate_runs;
  if (arguments.speed_reruns > 0) {
    const fs::path work = arguments.work.empty() ? fs::path(arguments.candidate + ".speed")
                                                 : fs::path(arguments.work);
    const std::string instead =
        "run the baseline's and the candidate's jobs alternately yourself and pass them with "
        "--speed-baseline DIR... --speed-candidate DIR...";
    const CaseRerunner baseline_rerunner(baseline, work / "baseline", instead);
    const CaseRerunner candidate_rerunner(candidate, work / "candidate", instead);
    const int64_t count = arguments.speed_reruns;
    const auto rerun_baseline_case = [&](int64_t i) {
      baseline_runs.push_back(baseline_rerunner.rerun(
          work / fmt::format("baseline-{}", i),
          fmt::format("speed pair {} of {}: the baseline's case", i + 1, count)));
    };
    const auto rerun_candidate_case = [&](int64_t i) {
      candidate_runs.push_back(candidate_rerunner.rerun(
          work / fmt::format("candidate-{}", i),
          fmt::format("speed pair {} of {}: the candidate's case", i + 1, count)));
    };
    // A B, B A, A B, ...: the second run of a pair can be slower for being second (the load
    // test measured up to 1.2% here); alternating the order cancels it.
    for (int64_t i = 0; i < count; ++i) {
      if (i % 2 == 0) {
        rerun_baseline_case(i);
        rerun_candidate_case(i);
      } else {
        rerun_candidate_case(i);
        rerun_baseline_case(i);
      }
    }
  } else {
    if (arguments.speed_baseline.size() != arguments.speed_candidate.size()) {
      throw InputError(fmt::format(
          "--speed-baseline gives {} run(s), --speed-candidate {}: interleaved pairs need as many "
          "of each (the i-th of both made one after the other)",
          arguments.speed_baseline.size(), arguments.speed_candidate.size()));
    }
    for (const std::string& dir : arguments.speed_baseline) {
      baseline_runs.push_back(read_run_dir(dir));
    }
    for (const std::string& dir : arguments.speed_candidate) {
      candidate_runs.push_back(read_run_dir(dir));
    }
  }
  compare::check_speed_reruns(baseline_runs, baseline, candidate_runs, candidate);
  runs.b = step_times_of(baseline_runs, "baseline");
  runs.a = step_times_of(candidate_runs, "candidate");
  return runs;
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100); }

void print_calibration(const compare::Calibration& calibration, std::ostream& out) {
  out << fmt::format(
      "calibrated for {}\n  {} reruns by {} at {}, margin {}\n"
      "  observed: loss |A - B| <= {:.3g}, tensors |A - B| <= {:.3g}, throughput drop {}, "
      "memory growth {}\n"
      "  gate:     loss atol {:.3g}, tensor atol {:.3g}, throughput drop <= {}, memory growth "
      "<= {}\n",
      calibration.platform, calibration.reruns, calibration.producer, calibration.calibrated_at,
      calibration.margin, calibration.loss_max_abs, calibration.tensor_max_abs,
      percent(calibration.throughput_drop), percent(calibration.memory_growth),
      calibration.loss_atol, calibration.tensor_atol, percent(calibration.max_throughput_drop),
      percent(calibration.max_memory_growth));
}

}  // namespace

void register_gate_command(CLI::App& app, int& exit_status) {
  auto arguments = std::make_shared<GateArguments>();
  CLI::App* command = app.add_subcommand(
      "gate",
      fmt::format(
          "Regression gate: judge a candidate run against a stored golden run of the same case "
          "(compare's checks, plus throughput and memory thresholds that fail), with tolerances "
          "calibrated from reruns when the baseline holds them for this platform; throughput "
          "judged by the confidence interval of the ratio of the step times' {:g}% quantiles. "
          "Exit 0 pass, 1 fail, 2 bad input, 3 a run is incomplete, 5 inconclusive (the "
          "throughput interval straddles the threshold, or lies below it from fewer than {} "
          "pairs of runs: rerun with more repetitions, --speed-reruns N)",
          compare::kStepTimeQuantile * 100, compare::kMinPairsToFail));
  command->add_option("--baseline", arguments->baseline, "the golden run directory")->required();
  auto* candidate =
      command->add_option("--candidate", arguments->candidate, "the run directory to judge");
  auto* calibrate = command->add_option(
      "--calibrate", arguments->calibrate,
      "rerun the baseline's case N times (ddp_ref or pmap_engine baselines) and store the "
      "tolerances they need in BASELINE/gate.json under this platform");
  calibrate->check(integer_in(1, 100));
  auto* reruns = command->add_option(
      "--reruns", arguments->reruns,
      "calibrate from these reruns of the baseline's case instead (runs parity cannot make: "
      "imported PyTorch or JAX jobs)");
  candidate->excludes(calibrate)->excludes(reruns);
  calibrate->excludes(reruns);
  command
      ->add_option("--max-throughput-drop", arguments->max_throughput_drop_percent,
                   "fail when samples/s drops by more than this percent (default 5)")
      ->check(number_in(0, 100));
  command
      ->add_option("--max-memory-growth", arguments->max_memory_growth_percent,
                   "fail when peak memory per replica grows by more than this percent "
                   "(default 10)")
      ->check(non_negative_number());
  command
      ->add_option("--margin", arguments->margin,
                   "calibration: tolerance = largest deviation of a rerun x this (default 2)")
      ->check(number_in(1, 1000));
  auto* speed_reruns = command->add_option(
      "--speed-reruns", arguments->speed_reruns,
      "judge throughput from N interleaved pairs of reruns of the baseline's case and the "
      "candidate's (A B, B A, A B, ...), each by the producer that made it (ddp_ref or "
      "pmap_engine runs)");
  speed_reruns->check(integer_in(1, 100));
  auto* speed_baseline = command->add_option(
      "--speed-baseline", arguments->speed_baseline,
      "judge throughput from these reruns of the baseline's case made elsewhere, interleaved "
      "with --speed-candidate's (the i-th of both made one after the other)");
  auto* speed_candidate = command->add_option(
      "--speed-candidate", arguments->speed_candidate,
      "the candidate's reruns interleaved with --speed-baseline's");
  speed_reruns->excludes(speed_baseline)->excludes(speed_candidate);
  speed_baseline->needs(speed_candidate);
  speed_candidate->needs(speed_baseline);
  for (auto* speed : {speed_reruns, speed_baseline, speed_candidate}) speed->needs(candidate);
  command
      ->add_option("--speed-confidence", arguments->speed_confidence_percent,
                   "confidence of the throughput ratio's interval, percent (default 95)")
      ->check(number_in(50, 99.9));
  command
      ->add_option("--work", arguments->work,
                   "where reruns go (default BASELINE.calibration for a calibration, "
                   "CANDIDATE.speed for --speed-reruns)")
      ->check(output_name());
  add_report_options(command, arguments->report, arguments->overwrite, "gate");
  command->add_flag("--no-color", arguments->no_color, "no ANSI colours in the verdict table");
  command->callback([arguments, &exit_status] {
    const auto report_folder =
        claim_report_folder(arguments->report, "parity gate", arguments->overwrite);
    const RunDir baseline = read_run_dir(arguments->baseline);
    compare::GateThresholds thresholds;
    thresholds.max_throughput_drop = arguments->max_throughput_drop_percent / 100;
    thresholds.max_memory_growth = arguments->max_memory_growth_percent / 100;

    if (arguments->calibrate > 0 || !arguments->reruns.empty()) {
      std::vector<RunDir> runs;
      for (const std::string& dir : arguments->reruns) runs.push_back(read_run_dir(dir));
      if (arguments->calibrate > 0) {
        const fs::path work = arguments->work.empty()
                                  ? fs::path(arguments->baseline + ".calibration")
                                  : fs::path(arguments->work);
        runs = rerun_baseline(baseline, arguments->calibrate, work);
      }
      const compare::Calibration calibration =
          compare::calibrate(baseline, runs, arguments->margin, thresholds);
      compare::write_calibration(arguments->baseline, calibration);
      print_calibration(calibration, std::cout);
      std::cout << fmt::format("parity gate: calibration stored in {}\n",
                               (fs::path(arguments->baseline) / "gate.json").string());
      exit_status = 0;
      return;
    }
    if (arguments->candidate.empty()) {
      throw InputError(
          "parity gate: give --candidate DIR to judge, or --calibrate N / --reruns "
          "DIR... to calibrate the baseline");
    }
    const auto calibrations = compare::read_calibrations(arguments->baseline);
    const auto found = calibrations.find(compare::current_platform());
    std::optional<compare::Calibration> calibration;
    if (found != calibrations.end()) {
      calibration = found->second;
      print_calibration(*calibration, std::cout);
    } else {
      std::cout << fmt::format(
          "not calibrated for {} ({} other platform(s) in gate.json): compare's default "
          "tolerances, throughput drop <= {}, memory growth <= {}\n",
          compare::current_platform(), calibrations.size(), percent(thresholds.max_throughput_drop),
          percent(thresholds.max_memory_growth));
    }
    const RunDir candidate_run = read_run_dir(arguments->candidate);
    compare::CompareOptions options = compare::gate_options(thresholds, calibration);
    options.speed = speed_runs(*arguments, baseline, candidate_run);
    const compare::ComparisonResult result =
        compare::compare_runs(candidate_run, baseline, options);
    ComparisonArguments output;
    output.no_color = arguments->no_color;
    exit_status = finish_comparison(result, arguments->report, output);
  });
}

}  // namespace parity::cli
