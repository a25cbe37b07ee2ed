// The catalogue of the documents' scenarios (cases/*.toml with a [scenario]) as CI runs it:
// `parity cases run --all` on the quick variants, every case judged against its expectation,
// and the catalogue report. Expected outcomes come from the case files; what this test adds is
// that each one really happens, with the diagnosis or error text the case names.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <nlohmann/json.hpp>

#include "command.h"
#include "parity/common/case_spec.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::run_command;
using testing::shell_quote;

const std::string kParity = PARITY_EXECUTABLE;

// Every item of docs/pitfalls.md, P3b (P3's step under jax.shard_map), P3c (the pmap step moved
// into jax.shard_map as it is), S5b (S5's jitted step fixed, partitioned), P12b (P12's
// P('data') on every leaf where each leaf divides: FSDP), the RNG items R1
// (torch's seed on every rank) and R2 (a key reused across steps), and the documents' claims no
// pitfall covers: C1 (communication volume), C2 (a 7B model's memory), C3 (ResNet step times,
// the CPU analogue), C4 (pmap over fewer devices), C5 (debugging inside jit); and the migration
// defaults of ../shared/docs/migration-defaults.md, M1-M14
// (tests/cli/migration_defaults_test.cpp swaps each default).
const std::vector<std::string> kItems = {
    "S1",  "S2", "S3", "S4", "S5", "S5b", "S6", "S7", "S8",  "S9",  "S10", "S11", "P1",  "P2",
    "P3", "P3b", "P3c", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11", "P12", "P12b", "P13",
    "P14", "R1",
    "R2",
    "C1",  "C2", "C3", "C4", "C5",
    "M1",  "M2", "M3", "M4", "M5", "M6", "M7", "M8", "M9", "M10", "M11", "M12", "M13",
    "M14"};

TEST(CasesCatalogue, EveryItemOfThePitfallsListHasExactlyOneCase) {
  std::map<std::string, int> cases_per_item;
  for (const CaseSpec& spec : list_cases()) {
    if (!spec.scenario.id.empty()) ++cases_per_item[spec.scenario.id];
  }
  for (const std::string& item : kItems) EXPECT_EQ(cases_per_item[item], 1) << item;
  EXPECT_EQ(cases_per_item.size(), kItems.size());
}

// --jax-version reaches the error programs, and each error case expects its release's text
// (scenario.expect_error_by_release): at jax-v0.4.38 P1 raises that tag's bare NameError
// (jax/_src/lax/parallel.py _check_axis_names), P6 asks for 65 devices
// (interpreters/pxla.py UnloadedPmapExecutable.from_hlo), P12 is refused by pjit.py
// pjit_check_aval_sharding's older wording; all three behave as their cases expect.
TEST(CasesCatalogue, JaxVersionReachesTheErrorProgramsAndTheirExpectations) {
  testing::TempDir out;
  const std::string command =
      fmt::format("{} cases run P1 P6 P12 --out {}", kParity, shell_quote(out.path().string()));
  const auto documents_era = run_command(command + " --jax-version 0.4.38", 300);
  EXPECT_EQ(documents_era.exit_code, 0) << documents_era.output;
  const nlohmann::json catalogue =
      nlohmann::json::parse(testing::read_bytes(out.path("catalogue/catalogue.json")));
  const nlohmann::json& p1 = catalogue.at("entries").at(0);
  EXPECT_THAT(p1.at("observed").get<std::string>(),
              HasSubstr("error: unbound axis name: devices (pmap_engine: raised by pmean;"));
  EXPECT_EQ(p1.at("expected"), "error containing \"unbound axis name: devices\"");
  EXPECT_EQ(p1.at("figures").at("jax_version"), "0.4.38");
  EXPECT_THAT(catalogue.at("entries").at(1).at("observed").get<std::string>(),
              HasSubstr("requires 65 logical devices, but only 8"));

  const auto pinned = run_command(command, 300);
  EXPECT_EQ(pinned.exit_code, 0) << pinned.output;

  const auto unknown = run_command(command + " --jax-version 0.5.0", 60);
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.output, HasSubstr("0.11.0"));
}

TEST(CasesCatalogue, RunAllBehavesAsEachCaseExpectsAndWritesTheCatalogue) {
  testing::TempDir out;
  const auto run = run_command(
      fmt::format("{} cases run --all --out {}", kParity, shell_quote(out.path().string())), 900);
  ASSERT_EQ(run.exit_code, 0) << run.output;

  const nlohmann::json catalogue =
      nlohmann::json::parse(testing::read_bytes(out.path("catalogue/catalogue.json")));
  EXPECT_EQ(catalogue.at("schema"), "parity-catalogue");
  EXPECT_EQ(catalogue.at("verdict"), "passes");
  std::map<std::string, nlohmann::json> by_id;
  std::vector<std::string> order;
  for (const auto& entry : catalogue.at("entries")) {
    by_id[entry.at("id")] = entry;
    order.push_back(entry.at("id"));
  }
  ASSERT_EQ(by_id.size(), kItems.size());
  // Catalogue order: S, P, R, C, M, by number within each (kItems is written in it).
  EXPECT_EQ(order, kItems);

  for (const CaseSpec& spec : list_cases()) {
    const ScenarioSpec& scenario = spec.scenario;
    if (scenario.id.empty()) continue;
    const nlohmann::json& entry = by_id.at(scenario.id);
    const std::string observed = entry.at("observed");
    if (scenario.expect == "not supported") {
      EXPECT_EQ(entry.at("outcome"), "not yet supported") << scenario.id;
      continue;
    }
    EXPECT_EQ(entry.at("outcome"), "as expected") << scenario.id << ": " << observed;
    // The verdict on the claim is the case's, the fact-check filled from the run's figures, and
    // the terminal printed both with the one-line summary.
    EXPECT_EQ(entry.at("verdict"), scenario.verdict) << scenario.id;
    const std::string fact_check = entry.at("fact_check");
    EXPECT_EQ(fact_check.find('{'), std::string::npos) << scenario.id << ": " << fact_check;
    EXPECT_FALSE(entry.at("figures").empty()) << scenario.id;
    const std::string summary = entry.at("summary");
    EXPECT_THAT(run.output, HasSubstr(fmt::format("{:<4} {:<21} {}: {}", scenario.id,
                                                  scenario.verdict, scenario.title, summary)));
    // Every case has a page of its own: its comparison's report, or the case page.
    EXPECT_TRUE(fs::exists(out.path(spec.name) / "report/report.html")) << scenario.id;
    EXPECT_EQ(entry.at("report"), "../" + spec.name + "/report/report.html") << scenario.id;
    if (scenario.expect == "error") {
      EXPECT_THAT(observed, HasSubstr(scenario.expect_error)) << scenario.id;
      EXPECT_THAT(entry.at("figures").at("error").get<std::string>(),
                  HasSubstr(scenario.expect_error));
      continue;
    }
    if (scenario.expect == "probe") continue;  // what a probe sees: tests/cases
    // A comparison: the verdict and diagnoses the case names.
    EXPECT_EQ(observed.rfind(scenario.expect, 0), 0u) << scenario.id << ": " << observed;
    for (const std::string& diagnosis : scenario.expect_diagnoses) {
      EXPECT_THAT(observed, HasSubstr(diagnosis)) << scenario.id;
    }
  }
  EXPECT_TRUE(fs::exists(out.path("catalogue/index.html")));
  EXPECT_TRUE(fs::exists(out.path("catalogue/catalogue.md")));
  // The gradients part at step 0 (8x DDP's), the losses at step 1 (after the first update).
  EXPECT_THAT(run.output, HasSubstr("P2   partly                psum instead of pmean: not "
                                     "equivalent from step 0; diagnosis P2"));
}

// Numbers in a fact-check come from the run (placeholders), never from the case file: with
// its placeholders removed, a fact-check holds no number but a step or axis 0 and the
// documents' section numbers.
TEST(CasesCatalogue, NoFactCheckQuotesANumberTheRunDidNotCompute) {
  const std::regex placeholder(R"(\{[^{}]*\})");
  const std::regex section(R"(\d{3} §[\d.]+|\d+\.\d+\.\d+)");  // "002 §2.3", "0.11.0"
  // A number that is not part of a name (f32, P12, se_gpu_pjrt_client.cc).
  const std::regex number(R"((^|[^\w.])(\d+(\.\d+)?(e-?\d+)?)(?!\w))");
  for (const CaseSpec& spec : list_cases()) {
    if (spec.scenario.id.empty()) continue;
    const std::string text = std::regex_replace(
        std::regex_replace(spec.scenario.fact_check, placeholder, ""), section, "");
    for (std::sregex_iterator it(text.begin(), text.end(), number), end; it != end; ++it) {
      const std::string found = (*it)[2];
      EXPECT_EQ(found, "0") << spec.scenario.id << " quotes " << found << " in: " << text;
    }
  }
}

TEST(CasesCatalogue, AFigureConditionThatFailsUnsettlesTheVerdict) {
  testing::TempDir out;
  const auto run = run_command(fmt::format(
      "{} cases run P2 --set train.steps=3 --set 'train.record_steps=[0]' --set "
      "'scenario.expect_figures=[\"grad_norm_ratio.first > 9\"]' --out {}",
      kParity, shell_quote(out.path().string())));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  // The gradients are the sum over 8 devices: 8x DDP's at step 0, not more.
  EXPECT_THAT(run.output, HasSubstr("P2   unsettled"));
  EXPECT_THAT(run.output, HasSubstr("(grad_norm_ratio.first is 8, not > 9)"));
  const nlohmann::json catalogue =
      nlohmann::json::parse(testing::read_bytes(out.path("catalogue/catalogue.json")));
  EXPECT_EQ(catalogue.at("entries").at(0).at("verdict"), "unsettled");
}

TEST(CasesCatalogue, ACaseThatDoesNotBehaveAsExpectedFailsTheRun) {
  // P2 expects the P2 diagnosis; trained with the faithful program it is equivalent instead.
  testing::TempDir out;
  const auto run =
      run_command(fmt::format("{} cases run P2 --set train.steps=3 --set "
                              "'train.record_steps=[0]' --set "
                              "scenario.engine_program=pmean --out {}",
                              kParity, shell_quote(out.path().string())));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("P2   unsettled"));
  EXPECT_THAT(run.output, HasSubstr("differs from the case's expectation"));
  EXPECT_THAT(run.output, HasSubstr("expected not equivalent; diagnosis P2"));
  EXPECT_THAT(run.output, HasSubstr("observed equivalent"));
  const nlohmann::json catalogue =
      nlohmann::json::parse(testing::read_bytes(out.path("catalogue/catalogue.json")));
  EXPECT_EQ(catalogue.at("verdict"), "fails");
}

TEST(CasesCatalogue, ShowPrintsTheClaimTheExpectationAndTheToml) {
  const auto shown = run_command(kParity + " cases show p3");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_THAT(shown.output, HasSubstr("P3 psum on the loss inside grad"));
  EXPECT_THAT(shown.output, HasSubstr("source       000 §5.2, §7"));
  EXPECT_THAT(shown.output, HasSubstr("expected     not equivalent; diagnosis P3"));
  EXPECT_THAT(shown.output, HasSubstr("program      psum-loss-in-grad"));
  EXPECT_THAT(shown.output, HasSubstr("[scenario]\nid = \"P3\""));
}

TEST(CasesCatalogue, UnknownCasesAndPlainCasesAreRefusedWithTheFix) {
  const auto unknown = run_command(kParity + " cases run P99");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("no case with id or name 'P99'"));
  EXPECT_THAT(unknown.output, HasSubstr("P14"));
  const auto plain = run_command(kParity + " cases run mlp2-fmnist");
  EXPECT_EQ(plain.exit_code, 2) << plain.output;
  EXPECT_THAT(plain.output, HasSubstr("parity run mlp2-fmnist"));
  const auto both = run_command(kParity + " cases run P2 --all");
  EXPECT_EQ(both.exit_code, 2) << both.output;
  // An error program does not train: parity run refuses it before training anything.
  testing::TempDir out;
  const auto error_case = run_command(fmt::format("{} run p1-axis-name-mismatch --out {}",
                                                  kParity, shell_quote(out.path().string())));
  EXPECT_EQ(error_case.exit_code, 2) << error_case.output;
  EXPECT_THAT(error_case.output, HasSubstr("run it with parity cases run P1"));
  EXPECT_FALSE(fs::exists(out.path("p1-axis-name-mismatch/ddp")));
}

}  // namespace
}  // namespace parity
