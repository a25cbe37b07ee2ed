// report.json: parses back, holds every figure of the result, keeps non-finite numbers as the
// strings run directories use.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "parity/reports/reports.h"
#include "sample_results.h"

namespace parity::reports {
namespace {

using nlohmann::json;
using testing::failing_result;

TEST(JsonReport, HasSchemaAndVerdict) {
  const json report = json::parse(render_json(failing_result()));
  EXPECT_EQ(report["schema"], "parity-report");
  EXPECT_EQ(report["schema_version"], compare::kReportSchemaVersion);
  EXPECT_EQ(report["verdict"], "not equivalent");
  EXPECT_EQ(report["headline"], failing_result().headline);
  EXPECT_EQ(report["generated_at"], "2026-12-02T16:45:02Z");
}

TEST(JsonReport, HoldsEveryCheckFigureAndTensor) {
  const compare::ComparisonResult result = failing_result();
  const json report = json::parse(render_json(result));
  ASSERT_EQ(report["checks"].size(), result.checks.size());
  for (size_t c = 0; c < result.checks.size(); ++c) {
    const compare::Check& check = result.checks[c];
    const json& written = report["checks"][c];
    EXPECT_EQ(written["id"], check.id);
    EXPECT_EQ(written["title"], check.title);
    EXPECT_EQ(written["summary"], check.summary);
    EXPECT_EQ(written["details"].size(), check.details.size());
    ASSERT_EQ(written["figures"].size(), check.figures.size());
    for (size_t f = 0; f < check.figures.size(); ++f) {
      const json& figure = written["figures"][f];
      EXPECT_EQ(figure["name"], check.figures[f].name);
      EXPECT_EQ(figure["unit"], check.figures[f].unit);
      if (std::isfinite(check.figures[f].value)) {
        EXPECT_EQ(figure["value"].get<double>(), check.figures[f].value);
      }
    }
    ASSERT_EQ(written["tensors"].size(), check.tensors.size());
    for (size_t t = 0; t < check.tensors.size(); ++t) {
      EXPECT_EQ(written["tensors"][t]["name"], check.tensors[t].name);
      EXPECT_EQ(written["tensors"][t]["norm_ratio"].get<double>(), check.tensors[t].norm_ratio);
      EXPECT_EQ(written["tensors"][t]["within_tolerance"], check.tensors[t].within_tolerance);
    }
    if (check.first_failing_step) {
      EXPECT_EQ(written["first_failing_step"], *check.first_failing_step);
    } else {
      EXPECT_TRUE(written["first_failing_step"].is_null());
    }
  }
  EXPECT_EQ(report["checks"][0]["status"], "fail");
  EXPECT_EQ(report["checks"][3]["status"], "not recorded");
  EXPECT_EQ(report["checks"][0]["figures"][3]["value"], "NaN");
  EXPECT_EQ(report["checks"][2]["figures"][1]["value"], "Infinity");
  ASSERT_EQ(report["diagnoses"].size(), 1u);
  EXPECT_EQ(report["diagnoses"][0]["pitfall"], "P2");
}

TEST(JsonReport, HoldsRunsTolerancesAndSeries) {
  const compare::ComparisonResult result = failing_result();
  const json report = json::parse(render_json(result));
  const json& a = report["runs"]["a"];
  EXPECT_EQ(a["dir"], result.a.dir);
  EXPECT_EQ(a["replicas"], 8);
  EXPECT_EQ(a["samples_per_second"].get<double>(), result.a.samples_per_second);
  EXPECT_EQ(a["peak_bytes_per_replica"].get<std::vector<int64_t>>(),
            result.a.peak_bytes_per_replica);
  EXPECT_EQ(a["versions"][testing::kScript], testing::kCdataEnd);
  EXPECT_EQ(a["parallel_style"], "jit-fsdp");
  EXPECT_EQ(a["param_bytes_per_replica"].get<std::vector<int64_t>>(),
            result.a.param_bytes_per_replica);
  EXPECT_EQ(a["optimizer_state_bytes_per_replica"].get<std::vector<int64_t>>(),
            result.a.optimizer_state_bytes_per_replica);
  EXPECT_EQ(a["state_layout"], result.a.state_layout);
  // Control characters survive (JSON escapes them); invalid UTF-8 is replaced.
  EXPECT_EQ(a["host"], result.a.host);
  EXPECT_EQ(report["runs"]["b"]["host"],
            "\x1b[31mredbad\xEF\xBF\xBD"
            "byte");
  EXPECT_EQ(report["tolerances"]["loss"]["rtol"].get<double>(), 1.3e-6);
  EXPECT_EQ(report["tolerances"]["loss"]["source"], result.loss_tolerance.source);

  const json& series = report["series"];
  ASSERT_EQ(series["steps"].size(), 200u);
  EXPECT_EQ(series["loss_b"][0].get<double>(), result.series.loss_b[0]);
  EXPECT_EQ(series["loss_a"][149], "NaN");
  EXPECT_EQ(series["grad_norm_ratio"][148], "Infinity");
  for (const char* name :
       {"loss_abs_diff", "loss_tolerance", "replica_spread_a", "replica_spread_b"}) {
    EXPECT_EQ(series[name].size(), 200u) << name;
  }
}

TEST(JsonReport, HoldsTheGatesThroughputIntervalAndNullWithoutOne) {
  compare::ComparisonResult result = failing_result();
  EXPECT_TRUE(json::parse(render_json(result))["speed"].is_null());
  compare::SpeedInterval speed;
  speed.throughput_ratio = 0.91;
  speed.low = 0.89;
  speed.high = 0.93;
  speed.pairs = 20;
  speed.candidate_steps = 800;
  speed.baseline_steps = 800;
  speed.block_length = 3;
  speed.resamples = 4000;
  speed.verdict = "fail";
  result.speed = speed;
  const json report = json::parse(render_json(result))["speed"];
  EXPECT_EQ(report["throughput_ratio"].get<double>(), 0.91);
  EXPECT_EQ(report["low"].get<double>(), 0.89);
  EXPECT_EQ(report["high"].get<double>(), 0.93);
  EXPECT_EQ(report["confidence"].get<double>(), 0.95);
  EXPECT_EQ(report["threshold"].get<double>(), 0.95);
  EXPECT_EQ(report["pairs"], 20);
  EXPECT_EQ(report["candidate_steps"], 800);
  EXPECT_EQ(report["block_length"], 3);
  EXPECT_EQ(report["verdict"], "fail");
}

}  // namespace
}  // namespace parity::reports
