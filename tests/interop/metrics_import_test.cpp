// `parity import metrics`: a real ddp_ref run's losses, logged the way training scripts log them
// (JSON Lines, CSV), come back as a run directory that compare finds identical to the run, and
// TensorBoard scalars from a real SummaryWriter file become the loss curve. Bad files are refused
// with the file, the line and the fix.
#include "parity/interop/metrics_import.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <fstream>

#include "command.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/common/rng_streams.h"
#include "parity/common/run_dir.h"
#include "parity/compare/compare.h"
#include "test_files.h"

namespace parity::interop {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kOverrides = {"train.steps=6", "data.per_replica_batch=16",
                                             "train.record_steps=[0]"};

CaseSpec small_case() { return load_case("mlp2-fmnist", kOverrides); }

// A real ddp_ref run of the small case, made once per test program (removed at exit).
const std::filesystem::path& ddp_run() {
  static const testing::TempDir dir;
  static const std::filesystem::path out = [] {
    std::string sets;
    for (const std::string& set : kOverrides) sets += " --set " + set;
    const auto result = testing::run_command(
        fmt::format("{} ddp mlp2-fmnist{} --quiet --overwrite --out {}", PARITY_EXECUTABLE, sets,
                    dir.path("ddp").string()),
        300);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return dir.path("ddp");
  }();
  return out;
}

// The run's per-step losses and grad norms as a script would log them, and its final
// evaluation once, at the last step.
void write_logs(const RunDir& run, const std::filesystem::path& jsonl,
                const std::filesystem::path& csv) {
  std::ofstream lines(jsonl);
  std::ofstream table(csv);
  table << "epoch,step,train/loss,grad_norm,test/loss,test/accuracy\n";
  const double test_loss = run.info.results.at("test_loss");
  const double test_accuracy = run.info.results.at("test_accuracy");
  for (const StepMetrics& step : run.steps) {
    const bool last = &step == &run.steps.back();
    lines << fmt::format("{{\"step\": {}, \"train/loss\": {:.17g}, \"grad_norm\": {:.17g}}}\n",
                         step.step, step.loss, step.grad_norm);
    if (last) {
      lines << fmt::format(
          "{{\"step\": {}, \"test/loss\": {:.17g}, \"test/accuracy\": {:.17g}}}\n", step.step,
          test_loss, test_accuracy);
    }
    table << fmt::format("0,{},{:.17g},{:.17g},{},{}\n", step.step, step.loss, step.grad_norm,
                         last ? fmt::format("{:.17g}", test_loss) : "",
                         last ? fmt::format("{:.17g}", test_accuracy) : "");
  }
}

TEST(MetricsImport, ARunsLossesLoggedAsJsonLinesOrCsvCompareIdenticalToTheRun) {
  testing::TempDir dir;
  const RunDir original = read_run_dir(ddp_run());
  write_logs(original, dir.path("log.jsonl"), dir.path("log.csv"));
  for (const std::string source : {"log.jsonl", "log.csv"}) {
    MetricsImport request;
    request.source = dir.path(source);
    request.mapping = {{"loss", "train/loss"},
                       {"grad_norm", "grad_norm"},
                       {"test_loss", "test/loss"},
                       {"test_accuracy", "test/accuracy"}};
    request.out_dir = dir.path(source + ".run");
    const ImportSummary summary = import_metrics(small_case(), request);
    EXPECT_EQ(summary.steps, 6) << source;

    const RunDir imported = read_run_dir(request.out_dir);
    EXPECT_EQ(imported.info.case_hash, original.info.case_hash) << source;
    // The final values a comparison over seeds judges, as the producer recorded them.
    for (const char* result : {"final_loss", "test_loss", "test_accuracy"}) {
      EXPECT_EQ(imported.info.results.at(result), original.info.results.at(result))
          << source << ": " << result;
    }
    const compare::ComparisonResult result =
        compare::compare_run_dirs(request.out_dir, ddp_run(), {});
    const auto loss = std::find_if(result.checks.begin(), result.checks.end(),
                                   [](const compare::Check& c) { return c.id == "loss_curve"; });
    ASSERT_NE(loss, result.checks.end());
    EXPECT_EQ(loss->status, compare::CheckStatus::kPass) << source << ": " << loss->summary;
    EXPECT_THAT(loss->summary, HasSubstr("worst |A - B| 0 ")) << source;
  }
}

// Each step's wall time, logged by the script, becomes the run's step times (what parity gate
// judges throughput by) and run.json's timings, as a producer's: the first step apart, then the
// median and interquartile range of the rest.
TEST(MetricsImport, LoggedStepTimesBecomeTheRunsTimings) {
  testing::TempDir dir;
  const std::array<double, 6> seconds = {0.5, 0.012, 0.010, 0.011, 0.013, 0.010};
  {
    std::ofstream lines(dir.path("log.jsonl"));
    for (size_t step = 0; step < seconds.size(); ++step) {
      lines << fmt::format("{{\"step\": {}, \"loss\": 2.3, \"step_time\": {}}}\n", step,
                           seconds[step]);
    }
  }
  MetricsImport request;
  request.source = dir.path("log.jsonl");
  request.mapping = {{"loss", "loss"}, {"step_seconds", "step_time"}};
  request.out_dir = dir.path("run");
  import_metrics(small_case(), request);
  const RunDir imported = read_run_dir(request.out_dir);
  ASSERT_EQ(imported.steps.size(), seconds.size());
  for (size_t step = 0; step < seconds.size(); ++step) {
    EXPECT_EQ(imported.steps[step].step_seconds, seconds[step]) << step;
  }
  EXPECT_EQ(imported.info.timings.first_step_seconds, 0.5);
  EXPECT_EQ(imported.info.timings.steady_steps, 5);
  EXPECT_EQ(imported.info.timings.steady_step_median_seconds, 0.011);
}

TEST(MetricsImport, SummaryWriterScalarsBecomeTheLossCurve) {
  testing::TempDir dir;
  MetricsImport request;
  request.source = std::filesystem::path(PARITY_TFEVENTS_DIR) / "pytorch-summarywriter";
  request.mapping = {{"loss", "strict/foo"}};
  request.out_dir = dir.path("run");
  EXPECT_EQ(import_metrics(small_case(), request).steps, 100);
  const RunDir run = read_run_dir(request.out_dir);
  EXPECT_EQ(run.info.producer, "import:tensorboard");
  EXPECT_EQ(run.info.status, "complete");
  // expected.json's first two scalars: steps 0 and 5.
  EXPECT_EQ(run.steps.at(0).loss, 1.4962565898895264);
  EXPECT_EQ(run.steps.at(1).step, 5);
  EXPECT_EQ(run.steps.at(1).loss, 1.7682218551635742);
}

// The small case with dropout (mlp-fmnist-dropout's "Dropout_0"), for logged masks.
CaseSpec dropout_case() { return load_case("mlp-fmnist-dropout", kOverrides); }

std::string import_error(const CaseSpec& spec, const std::filesystem::path& source,
                         const std::string& loss_name) {
  MetricsImport request;
  request.source = source;
  request.mapping = {{"loss", loss_name}};
  request.out_dir = source.string() + ".run";
  try {
    import_metrics(spec, request);
  } catch (const InputError& error) {
    EXPECT_FALSE(std::filesystem::exists(request.out_dir / "run.json"));  // nothing written
    return error.what();
  }
  return "no error";
}

std::string import_error(const std::filesystem::path& source, const std::string& loss_name) {
  return import_error(small_case(), source, loss_name);
}

TEST(MetricsImport, BadLogsAreRefusedWithTheFileLineAndFix) {
  testing::TempDir dir;
  std::ofstream(dir.path("cell.csv")) << "step,loss\n0,0.5\n1,oops\n";
  EXPECT_THAT(import_error(dir.path("cell.csv"), "loss"),
              HasSubstr("cell.csv line 3, column 2 (loss): 'oops' is not a number"));
  std::ofstream(dir.path("nostep.csv")) << "iteration,loss\n0,0.5\n";
  EXPECT_THAT(import_error(dir.path("nostep.csv"), "loss"),
              HasSubstr("nostep.csv line 1: the header has no \"step\" column (found: "
                        "iteration, loss)"));
  std::ofstream(dir.path("broken.jsonl")) << "{\"step\": 0, \"loss\": 0.5}\n{\"step\": 1, \n";
  EXPECT_THAT(import_error(dir.path("broken.jsonl"), "loss"),
              HasSubstr("broken.jsonl line 2, column"));
  std::ofstream(dir.path("twice.jsonl")) << "{\"step\": 0, \"loss\": 0.5}\n"
                                            "{\"step\": 0, \"loss\": 0.7}\n";
  EXPECT_THAT(import_error(dir.path("twice.jsonl"), "loss"),
              HasSubstr("'loss' at step 0 is 0.7 here but 0.5 earlier"));
  std::ofstream(dir.path("ok.jsonl")) << "{\"step\": 0, \"train_loss\": 0.5}\n";
  EXPECT_THAT(import_error(dir.path("ok.jsonl"), "loss"),
              HasSubstr("logs no 'loss'; it logs: train_loss"));
  std::ofstream(dir.path("replicas.jsonl"))
      << "{\"step\": 0, \"loss\": 0.5, \"replica_losses\": [0.4, \"lots\"]}\n";
  EXPECT_THAT(import_error(dir.path("replicas.jsonl"), "loss"),
              HasSubstr("replicas.jsonl line 1: \"replica_losses\" holds \"lots\", not a number"));
  std::ofstream(dir.path("digest.jsonl"))
      << "{\"step\": 0, \"loss\": 0.5, \"samples_digest\": 7}\n";
  EXPECT_THAT(import_error(dir.path("digest.jsonl"), "loss"),
              HasSubstr("digest.jsonl line 1: \"samples_digest\" must be a string"));
  // Lines the run directory's format cannot hold: per-replica losses of another count than
  // small_case()'s 8 replicas, negative steps; and a log with no metric at all.
  const std::vector<std::array<std::string, 3>> refusals = {
      {"two.jsonl", "{\"step\": 0, \"loss\": 0.5, \"replica_losses\": [0.4, 0.6]}\n",
       "two.jsonl line 1: \"replica_losses\" holds 2 losses, but case mlp2-fmnist trains 8 "
       "replicas (parallel.replicas); log one loss per replica, or import with --set "
       "parallel.replicas=2 if the run had 2"},
      {"nine.jsonl",
       "{\"step\": 0, \"loss\": 0.5, \"replica_losses\": [1, 1, 1, 1, 1, 1, 1, 1]}\n"
       "{\"step\": 1, \"loss\": 0.5, \"replica_losses\": [1, 1, 1, 1, 1, 1, 1, 1, 1]}\n",
       "nine.jsonl line 2: \"replica_losses\" holds 9 losses"},
      {"negative.jsonl", "{\"step\": 0, \"loss\": 0.5}\n{\"step\": -1, \"loss\": 0.7}\n",
       "negative.jsonl line 2: step -1 is negative; steps are 0-based optimizer steps"},
      {"negative.csv", "step,loss\n-3,0.5\n", "negative.csv line 2: step -3 is negative"},
      {"empty.jsonl", "\n", "empty.jsonl: logs no metric at any step"},
  };
  for (const auto& [file, text, message] : refusals) {
    std::ofstream(dir.path(file)) << text;
    EXPECT_THAT(import_error(dir.path(file), "loss"), HasSubstr(message));
  }
  // An empty list is the run directory's "not recorded", as interop/python's helpers write it.
  std::ofstream(dir.path("none.jsonl"))
      << "{\"step\": 0, \"loss\": 0.5, \"replica_losses\": []}\n";
  EXPECT_EQ(import_error(dir.path("none.jsonl"), "loss"), "no error");
  std::ofstream(dir.path("notes.txt")) << "loss 0.5\n";
  EXPECT_THAT(import_error(dir.path("notes.txt"), "loss"),
              HasSubstr("pass --format tfevents, jsonl or csv"));
}

// rng.jsonl beside the metrics (interop/python's log_dropout) is read as a run directory's: every
// imported step holds every replica of the case, and no draw lies at a step without a loss.
TEST(MetricsImport, LoggedDropoutDrawsMustMatchTheImportedStepsAndReplicas) {
  testing::TempDir dir;
  const auto log = [&](const std::string& name, int64_t draw_steps, int64_t replicas) {
    std::filesystem::create_directories(dir.path(name));
    std::ofstream(dir.path(name + "/metrics.jsonl")) << "{\"step\": 0, \"loss\": 0.5}\n"
                                                        "{\"step\": 1, \"loss\": 0.4}\n";
    std::ofstream rng(rng_streams_path(dir.path(name)));
    for (int64_t step = 0; step < draw_steps; ++step) {
      for (int64_t replica = 0; replica < replicas; ++replica) {
        const std::vector<uint8_t> keep = {1, 0, static_cast<uint8_t>(step), 1};
        rng << mask_draw_to_json_line(summarise_mask(step, replica, "Dropout_0", 0.5, keep))
            << '\n';
      }
    }
    return dir.path(name + "/metrics.jsonl");
  };
  EXPECT_THAT(import_error(dropout_case(), log("later", 3, 8), "loss"),
              HasSubstr("rng.jsonl: step 2 has dropout draws, but " +
                        dir.path("later/metrics.jsonl").string() +
                        " logs no loss at step 2; log the masks at the steps whose metrics you "
                        "log"));
  EXPECT_THAT(import_error(dropout_case(), log("fewer", 2, 2), "loss"),
              HasSubstr("rng.jsonl: no draw for step 0, replica 2, site \"Dropout_0\""));

  // Masks of a case without dropout cannot be its run's (mlp2-fmnist has no dropout layer).
  EXPECT_THAT(import_error(log("no-dropout", 2, 8), "loss"),
              HasSubstr("holds dropout masks, but case mlp2-fmnist has no dropout"));

  MetricsImport request;
  request.source = log("complete", 2, 8);
  request.mapping = {{"loss", "loss"}};
  request.out_dir = dir.path("complete.run");
  EXPECT_EQ(import_metrics(dropout_case(), request).dropout_draws, 2 * 8);
  EXPECT_EQ(read_run_dir(request.out_dir).rng.size(), 2u * 8);
}

}  // namespace
}  // namespace parity::interop
