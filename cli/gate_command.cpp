// parity gate: a candidate run judged against a stored golden run (compare/gate.h).
//   parity gate --baseline DIR --candidate DIR       the gate; exit codes as compare's
//   parity gate --baseline DIR --calibrate N         N reruns of the baseline's case by the
//                                                    producer that made it, then gate.json
//   parity gate --baseline DIR --reruns DIR...       the same from reruns made elsewhere (a
//                                                    real PyTorch or JAX job, imported)
#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "comparison_output.h"
#include "numeric_options.h"
#include "parity/common/error.h"
#include "parity/common/run_dir.h"
#include "parity/compare/gate.h"
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
  double max_throughput_drop_percent = 5;
  double max_memory_growth_percent = 10;
  double margin = 2;
  bool no_color = false;
};

// The baseline's case, from the canonical TOML its run.json records.
CaseSpec baseline_case(const RunDir& baseline, const fs::path& work) {
  if (baseline.info.case_toml.empty()) {
    throw InputError(fmt::format("{}: run.json records no case text, so the case cannot be rerun",
                                 baseline.dir.string()));
  }
  create_output_directory(work);
  const fs::path file = work / (baseline.info.case_name + ".toml");
  write_text_file_atomically(file, baseline.info.case_toml);
  CaseSpec spec = load_case(file.string());
  if (spec.hash() != baseline.info.case_hash) {
    throw InputError(fmt::format(
        "{}: its case text hashes to {} here, not to the {} it recorded (made by another "
        "parity version?); make a new baseline",
        baseline.dir.string(), spec.hash(), baseline.info.case_hash));
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

// Reruns the baseline's case `count` times with the producer that made it (in as many
// processes as the case says).
std::vector<RunDir> rerun_baseline(const RunDir& baseline, int64_t count, const fs::path& work) {
  const std::string& producer = baseline.info.producer;
  if (producer != "ddp_ref" && producer != "pmap_engine") {
    throw InputError(fmt::format(
        "{} was made by {}, which parity cannot rerun; run your job {} times, import each run "
        "(parity import metrics / tensors) and pass them with --reruns",
        baseline.dir.string(), producer, count));
  }
  const CaseSpec spec = baseline_case(baseline, work);
  const fs::path init = ensure_init_file(spec, "", work);
  std::vector<RunDir> reruns;
  for (int64_t i = 0; i < count; ++i) {
    const fs::path out = work / fmt::format("rerun-{}", i);
    std::cerr << fmt::format("parity gate: rerun {} of {} ({}, case {}) -> {}\n", i + 1, count,
                             producer, spec.name, out.string());
    if (producer == "ddp_ref") {
      ddp_ref::DdpOptions options;
      set_rerun_options(options, init, out);
      ddp_ref::train(spec, options);
    } else {
      engine_trainer::EngineOptions options;
      set_rerun_options(options, init, out);
      options.step.program = spec.scenario.engine_program;
      train_engine(spec, options, spec.parallel.processes);
    }
    reruns.push_back(read_run_dir(out));
  }
  return reruns;
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
      "Regression gate: judge a candidate run against a stored golden run of the same case "
      "(compare's checks, plus throughput and memory thresholds that fail), with tolerances "
      "calibrated from reruns when the baseline holds them for this platform. Exit 0 pass, 1 "
      "fail, 2 bad input, 3 a run is incomplete");
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
  command->add_option("--work", arguments->work,
                      "calibration: where the reruns go (default BASELINE.calibration)");
  command->add_option("--report", arguments->report,
                      "write report.html, report.md, report.json and junit.xml into this folder");
  command->add_flag("--no-color", arguments->no_color, "no ANSI colours in the verdict table");
  command->callback([arguments, &exit_status] {
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
    const compare::ComparisonResult result =
        compare::compare_runs(read_run_dir(arguments->candidate), baseline,
                              compare::gate_options(thresholds, calibration));
    ComparisonArguments output;
    output.no_color = arguments->no_color;
    exit_status = finish_comparison(result, arguments->report, output);
  });
}

}  // namespace parity::cli
