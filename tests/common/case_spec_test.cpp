// Case files: the three shipped cases, defaults, overrides, the canonical form and its hash,
// and the error message of every kind of bad input. Also the FNV-1a digest the hash uses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/digest.h"
#include "parity/common/error.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Digest

// Test vectors of 64-bit FNV-1a from the reference page's test suite
// (http://www.isthe.com/chongo/tech/comp/fnv/, test_fnv.c: fnv1a_64_vector), re-checked with
//   python3 -c "h=14695981039346656037
//   for b in b'foobar': h^=b; h=(h*1099511628211)%2**64
//   print('%016x'%h)"
TEST(Digest, Fnv1a64MatchesPublishedVectors) {
  EXPECT_EQ(Fnv1a64().update("").hex(), "cbf29ce484222325");
  EXPECT_EQ(Fnv1a64().update("a").hex(), "af63dc4c8601ec8c");
  EXPECT_EQ(Fnv1a64().update("foobar").hex(), "85944171f73967e8");
  EXPECT_EQ(Fnv1a64().update("a").value(), 0xaf63dc4c8601ec8cull);
}

TEST(Digest, UpdatesChainLikeOneUpdate) {
  EXPECT_EQ(Fnv1a64().update("foo").update("bar").hex(), Fnv1a64().update("foobar").hex());
}

// Golden values: python3 -c "import struct; ... f(struct.pack('<4q', 0, 1, 2, -1))" with f the
// FNV-1a loop above (Python 3.11).
TEST(Digest, SampleIdsAreLittleEndianInt64) {
  EXPECT_EQ(digest_sample_ids({0, 1, 2, -1}), "625fcc0254479c3e");
  EXPECT_EQ(digest_sample_ids({7}), "4bd7a317074c5b62");
  EXPECT_EQ(digest_sample_ids({}), "cbf29ce484222325");
  EXPECT_NE(digest_sample_ids({1, 2}), digest_sample_ids({2, 1}));
  // The set digest is the ordered digest of the sorted ids.
  EXPECT_EQ(digest_sample_set({2, 1}), digest_sample_ids({1, 2}));
  EXPECT_EQ(digest_sample_set({2, 1, 7}), digest_sample_set({7, 1, 2}));
  EXPECT_EQ(count_duplicates({3, 1, 3, 3, 2}), 2);
  EXPECT_EQ(count_duplicates({}), 0);
}

// ---------------------------------------------------------------------------------------------
// Helpers

// A fresh folder per test, removed afterwards, that case files are written into.
class CaseDir : public testing::TempDir {
 public:
  // Writes `text` to <dir>/<name>.toml and returns the path as a string.
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path file = path(name + ".toml");
    testing::write_bytes(file, text);
    return file.string();
  }
};

// Sets an environment variable for one scope and restores what was there before, so that a
// failing test cannot leak it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_value_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_value_) {
      ::setenv(name_, old_value_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_value_;
};

// The smallest valid case: everything else takes its default.
const char* const kMinimalCase = "[model]\nwidths = [784, 10]\n";

// Runs `load` and returns the InputError message ("" when nothing was thrown).
template <typename Load>
std::string error_of(Load load) {
  try {
    load();
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

std::string load_error(const std::string& file, const std::vector<std::string>& overrides = {}) {
  return error_of([&] { load_case(file, overrides); });
}

// ---------------------------------------------------------------------------------------------
// The shipped cases

TEST(CaseSpec, LoadsMlp2FmnistByName) {
  const CaseSpec spec = load_case("mlp2-fmnist");
  EXPECT_EQ(spec.name, "mlp2-fmnist");
  EXPECT_NE(spec.description.find("002 §2"), std::string::npos);
  EXPECT_EQ(spec.source_file, cases_dir() / "mlp2-fmnist.toml");
  EXPECT_EQ(spec.model.widths, (std::vector<int64_t>{784, 256, 10}));
  EXPECT_EQ(spec.model.activation, "tanh");
  EXPECT_EQ(spec.model.loss, "softmax_cross_entropy");
  EXPECT_EQ(spec.data.dataset, "fashion-mnist");
  EXPECT_EQ(spec.data.per_replica_batch, 64);
  EXPECT_EQ(spec.parallel.replicas, 8);
  EXPECT_EQ(spec.parallel.processes, 1);
  EXPECT_EQ(spec.train.steps, 200);
  EXPECT_EQ(spec.train.optimizer, "adam");
  EXPECT_DOUBLE_EQ(spec.train.lr, 1e-3);
  EXPECT_EQ(spec.train.record_steps, (std::vector<int64_t>{0, 199}));
  EXPECT_EQ(spec.init.scheme, "jax-normal");
  EXPECT_EQ(spec.init.seed, 0u);
  EXPECT_DOUBLE_EQ(spec.init.scale, 0.01);
  EXPECT_FALSE(spec.compare.oracle);
}

TEST(CaseSpec, LoadsLinear1024Mse) {
  const CaseSpec spec = load_case("linear1024-mse");
  EXPECT_NE(spec.description.find("000 §4.2"), std::string::npos);
  EXPECT_EQ(spec.model.widths, (std::vector<int64_t>{1024, 1024}));
  EXPECT_EQ(spec.model.loss, "mse");
  EXPECT_EQ(spec.data.dataset, "synthetic-linear");
  EXPECT_EQ(spec.data.per_replica_batch, 64);
  EXPECT_EQ(spec.parallel.replicas, 8);
  EXPECT_EQ(spec.train.optimizer, "adam");
  EXPECT_DOUBLE_EQ(spec.train.lr, 1e-3);
  EXPECT_EQ(spec.train.steps, 100);
}

TEST(CaseSpec, LoadsMlp4With4096GlobalBatch) {
  const CaseSpec spec = load_case("mlp4-1024");
  EXPECT_NE(spec.description.find("000 §4.5"), std::string::npos);
  EXPECT_NE(spec.description.find("activation"), std::string::npos);
  EXPECT_EQ(spec.model.widths, (std::vector<int64_t>{784, 1024, 1024, 1024, 10}));
  EXPECT_EQ(spec.model.widths.size() - 1, 4u);  // four dense layers
  EXPECT_EQ(spec.model.activation, "relu");
  EXPECT_EQ(spec.data.per_replica_batch * spec.parallel.replicas, 4096);
}

TEST(CaseSpec, ListCasesIsSortedAndHoldsTheShippedCases) {
  const std::vector<CaseSpec> cases = list_cases();
  std::vector<std::string> names;
  for (const CaseSpec& spec : cases) names.push_back(spec.name);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char* name : {"linear1024-mse", "mlp2-fmnist", "mlp4-1024"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

TEST(CaseSpec, NameAndPathGiveTheSameCase) {
  const CaseSpec by_name = load_case("mlp2-fmnist");
  const CaseSpec by_path = load_case((cases_dir() / "mlp2-fmnist.toml").string());
  EXPECT_EQ(by_name.hash(), by_path.hash());
}

TEST(CaseSpec, CasesDirHonoursEnvironment) {
  CaseDir dir;
  dir.write("only-here", kMinimalCase);
  {
    const ScopedEnv env("PARITY_CASES_DIR", dir.path().string());
    EXPECT_EQ(cases_dir(), dir.path());
    EXPECT_EQ(load_case("only-here").name, "only-here");
    EXPECT_EQ(list_cases().size(), 1u);
  }
  if (std::getenv("PARITY_CASES_DIR") == nullptr) {
    EXPECT_EQ(cases_dir(), fs::path(PARITY_SOURCE_DIR) / "cases");
  }
}

// ---------------------------------------------------------------------------------------------
// Defaults, canonical form, hash

TEST(CaseSpec, MinimalCaseTakesDefaults) {
  CaseDir dir;
  const CaseSpec spec = load_case(dir.write("minimal", kMinimalCase));
  const CaseSpec defaults;
  EXPECT_EQ(spec.name, "minimal");  // [case] name defaults to the file stem
  EXPECT_EQ(spec.description, "");
  EXPECT_EQ(spec.model.activation, defaults.model.activation);
  EXPECT_EQ(spec.data.dataset, "fashion-mnist");
  EXPECT_EQ(spec.data.per_replica_batch, 64);
  EXPECT_TRUE(spec.data.shuffle);
  EXPECT_FALSE(spec.data.drop_last);
  EXPECT_EQ(spec.data.synthetic_num_samples, 8192);
  EXPECT_EQ(spec.parallel.replicas, 8);
  EXPECT_EQ(spec.train.steps, 200);
  EXPECT_DOUBLE_EQ(spec.train.beta2, 0.999);
  EXPECT_DOUBLE_EQ(spec.train.eps, 1e-8);
  EXPECT_EQ(spec.train.dtype, "f32");
  EXPECT_TRUE(spec.train.record_steps.empty());
  EXPECT_DOUBLE_EQ(spec.init.scale, 0.01);
}

TEST(CaseSpec, CanonicalTomlRoundTrips) {
  CaseDir dir;
  for (const char* name : {"mlp2-fmnist", "linear1024-mse", "mlp4-1024"}) {
    CaseSpec spec = load_case(name, {"train.lr=0.1234567890123", "case.description=a \"quoted\"\\"});
    const CaseSpec again = load_case(dir.write(name, spec.to_toml()));
    EXPECT_EQ(again.to_toml(), spec.to_toml()) << name;
    EXPECT_EQ(again.hash(), spec.hash()) << name;
    EXPECT_EQ(again.train.lr, 0.1234567890123);
    EXPECT_EQ(again.description, "a \"quoted\"\\");
  }
}

// A run's recorded case (run.json's case.toml) reads back as the case it was written from.
TEST(CaseSpec, CaseFromTextReadsTheCanonicalTomlBack) {
  const CaseSpec spec = load_case("p5-shared-dropout-key", {"rng.seed=7", "rng.per_step=split"});
  const CaseSpec again = case_from_text(spec.to_toml(), "run/run.json (case.toml)");
  EXPECT_EQ(again.to_toml(), spec.to_toml());
  EXPECT_EQ(again.rng.seed, 7u);
  EXPECT_EQ(again.rng.per_step, "split");
  EXPECT_EQ(again.rng.per_device, "none");
  try {
    case_from_text("[rng]\nper_step = \"fold-in\"\n", "run/run.json (case.toml)");
    FAIL() << "a per_step outside the schema was accepted";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()),
              "rng.per_step: expected one of fold_in, split, none, found 'fold-in' at "
              "run/run.json (case.toml):2:12; did you mean 'fold_in'?");
  }
}

// jax.version: the JAX release the engine models (pmap_engine/jax_release.h). Left out of the
// canonical text at its default, so that every case written before it keeps its hash.
TEST(CaseSpec, JaxVersionIsOutOfTheHashAtItsDefaultAndChecked) {
  const CaseSpec base = load_case("p1-axis-name-mismatch");
  EXPECT_EQ(base.jax.version, "0.11.0");
  EXPECT_EQ(base.to_toml().find("[jax]"), std::string::npos);
  EXPECT_EQ(load_case("p1-axis-name-mismatch", {"jax.version=\"0.11.0\""}).hash(), base.hash());

  const CaseSpec documents_era = load_case("p1-axis-name-mismatch", {"jax.version=0.4.38"});
  EXPECT_EQ(documents_era.jax.version, "0.4.38");
  EXPECT_NE(documents_era.to_toml().find("[jax]\nversion = \"0.4.38\"\n"), std::string::npos);
  EXPECT_NE(documents_era.hash(), base.hash());
  EXPECT_EQ(case_from_text(documents_era.to_toml(), "run/run.json (case.toml)").jax.version,
            "0.4.38");

  EXPECT_EQ(load_error("p1-axis-name-mismatch", {"jax.version=0.5.0"}),
            "--set jax.version=0.5.0: jax.version: expected one of 0.11.0, 0.4.38, found "
            "'0.5.0'; did you mean '0.11.0'?");
}

// model.label_smoothing and its form: out of the canonical text at their defaults (no
// smoothing, torch's uniform form), so the cases written before them keep their hashes.
TEST(CaseSpec, LabelSmoothingIsOutOfTheHashAtItsDefaults) {
  const CaseSpec base = load_case("mlp2-fmnist");
  EXPECT_EQ(base.model.label_smoothing, 0.0);
  EXPECT_EQ(base.model.label_smoothing_form, "uniform");
  EXPECT_EQ(base.to_toml().find("label_smoothing"), std::string::npos);
  EXPECT_EQ(load_case("mlp2-fmnist", {"model.label_smoothing_form=uniform"}).hash(), base.hash());

  const CaseSpec smoothed = load_case(
      "mlp2-fmnist", {"model.label_smoothing=0.1", "model.label_smoothing_form=flax_examples"});
  EXPECT_NE(smoothed.to_toml().find("label_smoothing = 0.1\nlabel_smoothing_form = "
                                    "\"flax_examples\"\n"),
            std::string::npos)
      << smoothed.to_toml();
  EXPECT_NE(smoothed.hash(), base.hash());
  const CaseSpec again = case_from_text(smoothed.to_toml(), "run/run.json (case.toml)");
  EXPECT_EQ(again.model.label_smoothing, 0.1);
  EXPECT_EQ(again.model.label_smoothing_form, "flax_examples");
  EXPECT_EQ(again.hash(), smoothed.hash());
}

TEST(CaseSpec, CanonicalTomlPrintsEveryKeyInFixedOrder) {
  const std::string text = load_case("mlp2-fmnist").to_toml();
  const std::vector<std::string> in_order = {
      "[case]", "name = \"mlp2-fmnist\"", "[model]", "widths = [784, 256, 10]", "[data]",
      "synthetic_seed = 0", "[parallel]", "processes = 1", "[train]", "lr = 0.001",
      "momentum = 0.0", "eps = 1e-08", "record_steps = [0, 199]", "[init]", "scale = 0.01",
      "[compare]", "oracle = false"};
  size_t at = 0;
  for (const std::string& piece : in_order) {
    const size_t found = text.find(piece, at);
    ASSERT_NE(found, std::string::npos) << "'" << piece << "' missing or out of order in\n"
                                        << text;
    at = found;
  }
}

TEST(CaseSpec, HashIsHexAndFollowsContent) {
  const CaseSpec base = load_case("mlp2-fmnist");
  EXPECT_EQ(base.hash().size(), 16u);
  EXPECT_EQ(base.hash(), Fnv1a64().update(base.training_toml()).hex());
  EXPECT_EQ(load_case("mlp2-fmnist").hash(), base.hash());
  EXPECT_NE(load_case("mlp2-fmnist", {"train.lr=2e-3"}).hash(), base.hash());
  // An override that restates the file's value changes nothing.
  EXPECT_EQ(load_case("mlp2-fmnist", {"train.lr=1e-3"}).hash(), base.hash());
}

TEST(CaseSpec, CompareSectionIsRecordedButNotHashed) {
  // [compare] says how parity run judges the case, not what is trained: a run with the oracle
  // and one without trained the same scenario.
  const CaseSpec base = load_case("mlp2-fmnist");
  const CaseSpec with_oracle = load_case("mlp2-fmnist", {"compare.oracle=true"});
  EXPECT_TRUE(with_oracle.compare.oracle);
  EXPECT_EQ(with_oracle.hash(), base.hash());
  EXPECT_EQ(with_oracle.training_toml(), base.training_toml());
  EXPECT_NE(with_oracle.to_toml(), base.to_toml());
  EXPECT_NE(with_oracle.to_toml().find("[compare]\noracle = true\n"), std::string::npos);
  // The same for a case's own tensor band.
  const CaseSpec banded = load_case("s8-mixed-precision");
  EXPECT_EQ(banded.compare.tensor_atol, 0.02);
  EXPECT_EQ(banded.compare.tensor_rtol, 0.0);
  EXPECT_EQ(load_case("s8-mixed-precision", {"compare.tensor_atol=0"}).hash(), banded.hash());
  EXPECT_EQ(load_error("mlp2-fmnist", {"compare.tensor_atol=-1"}),
            "--set compare.tensor_atol=-1: compare.tensor_atol: expected a value >= 0, found -1.0");
}

TEST(CaseSpec, SeedKeysAndMarginsForSeedSets) {
  // Defaults: --seeds varies the dropout streams; the margins are a loss's 0.02 and one
  // percentage point of accuracy. Left out of the canonical text at their defaults.
  const CaseSpec base = load_case("mlp2-fmnist");
  EXPECT_EQ(base.compare.seed_keys, std::vector<std::string>{"rng.seed"});
  EXPECT_EQ(base.compare.seeds_loss_margin, 0.02);
  EXPECT_EQ(base.compare.seeds_accuracy_margin, 0.01);
  EXPECT_EQ(base.to_toml().find("seed_keys"), std::string::npos);
  const CaseSpec varied = load_case(
      "mlp2-fmnist", {"compare.seed_keys=[\"rng.seed\", \"data.seed\"]",
                      "compare.seeds_accuracy_margin=0.005"});
  EXPECT_EQ(varied.compare.seed_keys, (std::vector<std::string>{"rng.seed", "data.seed"}));
  EXPECT_EQ(varied.hash(), base.hash());
  EXPECT_NE(varied.to_toml().find("seed_keys = [\"rng.seed\", \"data.seed\"]"),
            std::string::npos);
  EXPECT_EQ(load_error("mlp2-fmnist", {"compare.seed_keys=[\"model.seed\"]"}),
            "--set compare.seed_keys=[\"model.seed\"]: compare.seed_keys: expected one of "
            "rng.seed, data.seed, init.seed, found 'model.seed'");
  EXPECT_NE(load_error("mlp2-fmnist", {"compare.seed_keys=[\"rng.seed\", \"rng.seed\"]"})
                .find("compare.seed_keys: 'rng.seed' is listed twice"),
            std::string::npos);
  EXPECT_NE(load_error("mlp2-fmnist", {"compare.seed_keys=[]"})
                .find("compare.seed_keys: no key to vary"),
            std::string::npos);
  EXPECT_EQ(load_error("mlp2-fmnist", {"compare.seeds_loss_margin=0"}),
            "--set compare.seeds_loss_margin=0: compare.seeds_loss_margin: expected a value > 0, "
            "found 0.0");
}

// ---------------------------------------------------------------------------------------------
// [scenario]: the catalogue's cases

TEST(CaseSpec, ScenarioIsReadRecordedAndNotHashed) {
  const CaseSpec spec = load_case("p2-psum-not-pmean");
  EXPECT_EQ(spec.scenario.id, "P2");
  EXPECT_EQ(spec.scenario.expect, "not equivalent");
  EXPECT_EQ(spec.scenario.expect_diagnoses, (std::vector<std::string>{"P2"}));
  EXPECT_EQ(spec.scenario.engine_program, "psum");
  EXPECT_EQ(spec.scenario.quick,
            (std::vector<std::string>{"train.steps=10", "train.record_steps=[0, 3, 9]"}));
  // The engine program is the user's code under test, not the case: same hash without it.
  const CaseSpec faithful = load_case("p2-psum-not-pmean", {"scenario.engine_program=pmean"});
  EXPECT_EQ(faithful.hash(), spec.hash());
  EXPECT_NE(faithful.to_toml(), spec.to_toml());
  CaseDir dir;
  const CaseSpec again = load_case(dir.write("p2-psum-not-pmean", spec.to_toml()));
  EXPECT_EQ(again.to_toml(), spec.to_toml());
  // A plain case prints no [scenario].
  EXPECT_EQ(load_case("mlp2-fmnist").to_toml().find("[scenario]"), std::string::npos);
}

TEST(CaseSpec, ScenarioErrorsNameTheKeyAndTheFix) {
  CaseDir dir;
  const std::string no_id = dir.write("a", std::string(kMinimalCase) +
                                               "[scenario]\nexpect = \"equivalent\"\n");
  EXPECT_EQ(load_error(no_id), "scenario.expect: a [scenario] needs an id (the item of "
                               "docs/pitfalls.md it reproduces, e.g. id = \"P2\") at " +
                                   no_id + ":4:10");
  const std::string scenario = std::string(kMinimalCase) +
                               "[scenario]\nid = \"P1\"\nverdict = \"confirmed\"\n"
                               "fact_check = \"why\"\n";
  const std::string bad_expect = dir.write("b", scenario + "expect = \"equivalnet\"\n");
  EXPECT_EQ(load_error(bad_expect),
            "scenario.expect: expected one of equivalent, not equivalent, error, probe, not "
            "supported, found 'equivalnet' at " + bad_expect + ":7:10; did you mean 'equivalent'?");
  const std::string no_text = dir.write("c", scenario + "expect = \"error\"\n");
  EXPECT_EQ(load_error(no_text), "scenario.expect = \"error\" needs scenario.expect_error, a "
                                 "part of the error text the engine must raise at " +
                                     no_text + ":7:10");
  const std::string no_missing = dir.write("d", scenario + "expect = \"not supported\"\n");
  EXPECT_EQ(load_error(no_missing), "scenario.expect = \"not supported\" needs "
                                    "scenario.missing, the engine feature the case waits for at " +
                                        no_missing + ":7:10");
  // The verdict on the claim, its fact-check and the figure conditions.
  const std::string header = std::string(kMinimalCase) + "[scenario]\nid = \"P1\"\n";
  const std::string no_verdict = dir.write("e", header + "expect = \"equivalent\"\n");
  EXPECT_EQ(load_error(no_verdict),
            "scenario.verdict: expected one of confirmed, refuted, partly, not reproducible here, "
            "not checkable here, found '' at " + no_verdict);
  const std::string no_fact_check =
      dir.write("f", header + "verdict = \"partly\"\nexpect = \"equivalent\"\n");
  EXPECT_EQ(load_error(no_fact_check),
            "scenario.fact_check: empty at " + no_fact_check +
                "; say what the engines show against the claim, and why the verdict is partly");
  const std::string open_placeholder =
      dir.write("g", header + "verdict = \"partly\"\nfact_check = \"{steps\"\n"
                                      "expect = \"equivalent\"\n");
  using ::testing::HasSubstr;
  EXPECT_THAT(load_error(open_placeholder),
              HasSubstr("scenario.fact_check: the placeholder opened at character 1 is not "
                        "closed"));
  const std::string bad_condition =
      dir.write("h", scenario + "expect = \"equivalent\"\nexpect_figures = [\"ratio = 8\"]\n");
  EXPECT_THAT(load_error(bad_condition),
              HasSubstr("scenario.expect_figures: 'ratio = 8' is not a figure condition"));
  EXPECT_EQ(load_error("p2-psum-not-pmean", {"scenario.engine_program=psun"}),
            "--set scenario.engine_program=psun: scenario.engine_program: expected one of pmean, "
            "psum, psum-divide, psum-loss-in-grad, psum-loss-in-grad-shard-map, "
            "pmean-shard-map, params-in-axes-none, init-per-device, "
            "no-grad-reduction, update-inside-accumulation, loss-without-cast, checkpoint-reshard, "
            "process-data-not-sharded, "
            "axis-name-mismatch, batch-65-on-8, jit-named-sharding, jit-params-sharded, "
            "probe-device-axis, probe-device-order, "
            "probe-recompilation, probe-dropout-key, probe-communication-volume, "
            "probe-memory-7b, probe-fewer-devices, probe-debugging, found 'psun'; did you mean "
            "'psum'?");
  EXPECT_EQ(load_error("p2-psum-not-pmean", {"scenario.quick=[1]"}),
            "--set scenario.quick=[1]: scenario.quick[0]: expected a string, found an integer");
}

// ---------------------------------------------------------------------------------------------
// Overrides

TEST(CaseSpec, OverridesParseTomlValues) {
  const CaseSpec spec = load_case(
      "mlp2-fmnist", {"train.lr=3e-4", "data.shuffle=false", "model.widths=[784,128,10]",
                      "train.optimizer=\"sgd\"", "train.momentum=0.9", "parallel.processes=2",
                      "train.record_steps=[]"});
  EXPECT_DOUBLE_EQ(spec.train.lr, 3e-4);
  EXPECT_FALSE(spec.data.shuffle);
  EXPECT_EQ(spec.model.widths, (std::vector<int64_t>{784, 128, 10}));
  EXPECT_EQ(spec.train.optimizer, "sgd");
  EXPECT_DOUBLE_EQ(spec.train.momentum, 0.9);
  EXPECT_EQ(spec.parallel.processes, 2);
  EXPECT_TRUE(spec.train.record_steps.empty());
}

TEST(CaseSpec, OverrideBareWordsAreStrings) {
  EXPECT_EQ(load_case("mlp2-fmnist", {"train.optimizer=sgd"}).train.optimizer, "sgd");
  EXPECT_EQ(load_case("mlp2-fmnist", {"train.dtype=bf16"}).train.dtype, "bf16");
  // A value that happens to be valid TOML (a number) is still text for a string key.
  EXPECT_EQ(load_case("mlp2-fmnist", {"case.description=42"}).description, "42");
}

TEST(CaseSpec, OverridesApplyInOrderAndCreateSections) {
  CaseDir dir;
  const CaseSpec spec =
      load_case(dir.write("t", kMinimalCase), {"train.steps=5", "train.steps=7", "init.seed=3"});
  EXPECT_EQ(spec.train.steps, 7);
  EXPECT_EQ(spec.init.seed, 3u);
}

TEST(CaseSpec, RecordStepsCountNegativesFromTheEndAndFormASet) {
  // The shipped cases say [0, -1]: fewer steps still record the first and the last.
  EXPECT_EQ(load_case("mlp2-fmnist", {"train.steps=10"}).train.record_steps,
            (std::vector<int64_t>{0, 9}));
  EXPECT_EQ(load_case("mlp2-fmnist", {"train.steps=1"}).train.record_steps,
            (std::vector<int64_t>{0}));
  EXPECT_EQ(load_case("mlp2-fmnist", {"train.record_steps=[7,-200,3,7,-193]"}).train.record_steps,
            (std::vector<int64_t>{0, 3, 7}));
  // Resolved values are what the hash sees: [0, -1] and [0, 199] are the same scenario.
  EXPECT_EQ(load_case("mlp2-fmnist", {"train.record_steps=[199,0]"}).hash(),
            load_case("mlp2-fmnist").hash());
}

TEST(CaseSpec, IntegerAcceptedWhereFloatExpected) {
  EXPECT_DOUBLE_EQ(load_case("mlp2-fmnist", {"train.lr=1"}).train.lr, 1.0);
  CaseDir dir;
  const CaseSpec spec = load_case(dir.write("t", "[model]\nwidths = [784, 10]\n[train]\nlr = 2\n"));
  EXPECT_DOUBLE_EQ(spec.train.lr, 2.0);
}

TEST(CaseSpec, OverrideErrorsNameTheOverride) {
  EXPECT_EQ(load_error("mlp2-fmnist", {"train.lrr=1"}),
            "--set train.lrr=1: unknown key 'lrr' in [train]; did you mean 'lr'?");
  EXPECT_EQ(load_error("mlp2-fmnist", {"trian.lr=1"}),
            "--set trian.lr=1: unknown section [trian]; did you mean [train]?");
  EXPECT_EQ(load_error("mlp2-fmnist", {"train.lr=fast"}),
            "--set train.lr=fast: train.lr: expected a float, found a string");
  EXPECT_EQ(load_error("mlp2-fmnist", {"train.lr=-1"}),
            "--set train.lr=-1: train.lr: expected a value > 0, found -1.0");
  const std::string layer_grammar =
      "; a layer's key is model.layers[INDEX].key=value (model.layers[2].momentum=0.99; inside a "
      "residual model.layers[4].layers[1].epsilon=1e-6)";
  EXPECT_EQ(load_error("mlp2-fmnist", {"lr=1"}),
            "--set lr=1: expected section.key=value (for example train.lr=3e-4)" + layer_grammar);
  EXPECT_EQ(load_error("mlp2-fmnist", {"train.lr"}),
            "--set train.lr: expected section.key=value (for example train.lr=3e-4)" +
                layer_grammar);
  EXPECT_EQ(load_error("mlp2-fmnist", {"model.widths=[784,\"x\",10]"}),
            "--set model.widths=[784,\"x\",10]: model.widths[1]: expected an integer, found a "
            "string");
  EXPECT_EQ(load_error("mlp2-fmnist", {"train.zzz=1"}),
            "--set train.zzz=1: unknown key 'zzz' in [train]; the keys of [train] are steps, "
            "optimizer, lr, momentum, nesterov, weight_decay, beta1, beta2, eps, eps_root, "
            "rms_decay, initial_accumulator_value, eps_in_sqrt, clip_grad_norm, clip_placement, "
            "grad_accum_steps, dtype, record_steps");
}

// ---------------------------------------------------------------------------------------------
// Errors in the file: positions and suggestions

TEST(CaseSpec, UnknownKeyNamesPositionAndSuggests) {
  CaseDir dir;
  const std::string file = dir.write("t", "[model]\nwidths = [784, 10]\n[train]\nlrr = 1\n");
  EXPECT_EQ(load_error(file), "unknown key 'lrr' in [train] at " + file + ":4:1; did you mean 'lr'?");
}

TEST(CaseSpec, UnknownSectionNamesPositionAndSuggests) {
  CaseDir dir;
  const std::string file = dir.write("t", "[model]\nwidths = [784, 10]\n\n[trian]\nlr = 1\n");
  EXPECT_EQ(load_error(file), "unknown section [trian] at " + file + ":4:2; did you mean [train]?");
  const std::string far = dir.write("u", "[model]\nwidths = [784, 10]\n[xyz]\n");
  EXPECT_EQ(load_error(far), "unknown section [xyz] at " + far +
                                 ":3:2; the sections are [case], [model], [data], [parallel], "
                                 "[train], [init], [rng], [jax], [compare], [scenario]");
}

TEST(CaseSpec, WrongTypeNamesPosition) {
  CaseDir dir;
  const std::string file =
      dir.write("t", "[model]\nwidths = [784, 10]\n[train]\nsteps = 3\nlr = \"fast\"\n");
  EXPECT_EQ(load_error(file), "train.lr: expected a float, found a string at " + file + ":5:6");
  const std::string steps = dir.write("s", "[model]\nwidths = [784, 10]\n[train]\nsteps = 1.5\n");
  EXPECT_EQ(load_error(steps), "train.steps: expected an integer, found a float at " + steps + ":4:9");
  const std::string list = dir.write("l", "[model]\nwidths = 784\n");
  EXPECT_EQ(load_error(list),
            "model.widths: expected an array of integers, found an integer at " + list + ":2:10");
  const std::string section = dir.write("x", "train = 3\n[model]\nwidths = [784, 10]\n");
  EXPECT_EQ(load_error(section),
            "train: expected a table ([train]), found an integer at " + section + ":1:1");
  const std::string element = dir.write("e", "[model]\nwidths = [784, true]\n");
  EXPECT_EQ(load_error(element),
            "model.widths[1]: expected an integer, found a boolean at " + element + ":2:16");
}

TEST(CaseSpec, TomlSyntaxErrorShowsPosition) {
  CaseDir dir;
  const std::string file = dir.write("t", "[model]\nwidths = [784, 10\n[train]\n");
  const std::string message = load_error(file);
  EXPECT_EQ(message.rfind(file + ":", 0), 0u) << message;
  EXPECT_NE(message.find("TOML syntax error: "), std::string::npos) << message;
  const std::string duplicate = dir.write("d", "[model]\nwidths = [784, 10]\nwidths = [1]\n");
  EXPECT_EQ(load_error(duplicate).rfind(duplicate + ":3:", 0), 0u) << load_error(duplicate);
}

TEST(CaseSpec, RangeErrorsInFileNamePosition) {
  CaseDir dir;
  const std::string file =
      dir.write("t", "[model]\nwidths = [784, 10]\n[parallel]\nreplicas = 0\n");
  EXPECT_EQ(load_error(file),
            "parallel.replicas: expected an integer >= 1, found 0 at " + file + ":4:12");
}

struct RangeCase {
  std::vector<std::string> overrides;
  std::string message;  // expected InputError text
};

void PrintTo(const RangeCase& range_case, std::ostream* out) {
  for (const std::string& text : range_case.overrides) *out << "--set " << text << " ";
}

class CaseSpecRange : public ::testing::TestWithParam<RangeCase> {};

TEST_P(CaseSpecRange, IsRefusedWithMessage) {
  EXPECT_EQ(load_error("mlp2-fmnist", GetParam().overrides), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    CaseSpec, CaseSpecRange,
    ::testing::Values(
        RangeCase{{"parallel.replicas=0"},
                  "--set parallel.replicas=0: parallel.replicas: expected an integer >= 1, "
                  "found 0"},
        RangeCase{{"train.steps=0"},
                  "--set train.steps=0: train.steps: expected an integer >= 1, found 0"},
        RangeCase{{"data.per_replica_batch=0"},
                  "--set data.per_replica_batch=0: data.per_replica_batch: expected an integer "
                  ">= 1, found 0"},
        RangeCase{{"train.lr=0"}, "--set train.lr=0: train.lr: expected a value > 0, found 0.0"},
        RangeCase{{"train.lr=nan"},
                  "--set train.lr=nan: train.lr: expected a finite number, found nan"},
        RangeCase{{"train.beta2=1"},
                  "--set train.beta2=1: train.beta2: expected a value in [0, 1), found 1.0"},
        RangeCase{{"data.seed=-1"},
                  "--set data.seed=-1: data.seed: expected an integer >= 0, found -1"},
        RangeCase{{"model.widths=[784]"},
                  "--set model.widths=[784]: model.widths: expected at least 2 widths (input "
                  "and output), found 1"},
        RangeCase{{"model.widths=[784,0,10]"},
                  "--set model.widths=[784,0,10]: model.widths[1]: expected a width >= 1, "
                  "found 0"},
        RangeCase{{"model.activation=sigmoid"},
                  "--set model.activation=sigmoid: model.activation: expected one of tanh, "
                  "relu, gelu, found 'sigmoid'"},
        RangeCase{{"train.optimizer=adma"},
                  "--set train.optimizer=adma: train.optimizer: expected one of sgd, adam, "
                  "adamw, rmsprop, adagrad, found 'adma'; did you mean 'adam'?"},
        RangeCase{{"train.dtype=fp16"},
                  "--set train.dtype=fp16: train.dtype: expected one of f32, bf16, f16, found "
                  "'fp16'; did you mean 'f16'?"},
        RangeCase{{"model.loss=ce"},
                  "--set model.loss=ce: model.loss: expected one of softmax_cross_entropy, mse, "
                  "found 'ce'"},
        RangeCase{{"model.label_smoothing=1"},
                  "--set model.label_smoothing=1: model.label_smoothing: expected a value in "
                  "[0, 1), found 1.0"},
        RangeCase{{"model.label_smoothing_form=optax"},
                  "--set model.label_smoothing_form=optax: model.label_smoothing_form: expected "
                  "one of uniform, flax_examples, found 'optax'"},
        RangeCase{{"data.dataset=synthetic-linear", "model.loss=mse", "model.widths=[8,8]",
                   "model.label_smoothing=0.1"},
                  "--set model.label_smoothing=0.1: model.label_smoothing: smooths the targets "
                  "of softmax_cross_entropy, but the loss is mse; remove label_smoothing, or use "
                  "loss = \"softmax_cross_entropy\""},
        RangeCase{{"data.dataset=mnist"},
                  "--set data.dataset=mnist: data.dataset: expected one of fashion-mnist, "
                  "synthetic-linear, found 'mnist'"},
        RangeCase{{"init.scheme=xavier"},
                  "--set init.scheme=xavier: init.scheme: expected one of jax-normal, flax, torch, "
                  "found 'xavier'"},
        RangeCase{{"parallel.processes=3"},
                  "--set parallel.processes=3: parallel.processes: 8 replicas cannot be spread "
                  "evenly over 3 processes; expected a divisor of parallel.replicas"},
        RangeCase{{"model.widths=[1024,10]"},
                  "--set model.widths=[1024,10]: model.widths: fashion-mnist images have 784 "
                  "features (28x28), so widths[0] must be 784, found 1024"},
        RangeCase{{"model.widths=[784,100]"},
                  "--set model.widths=[784,100]: model.widths: fashion-mnist has 10 classes, so "
                  "the last width must be 10, found 100"},
        RangeCase{{"model.loss=mse"},
                  "--set model.loss=mse: model.loss: fashion-mnist has integer class labels; "
                  "expected softmax_cross_entropy, found mse"},
        RangeCase{{"data.dataset=synthetic-linear", "model.loss=mse", "model.widths=[8,16]"},
                  "--set model.widths=[8,16]: model.widths: synthetic-linear targets are a "
                  "permutation of input features, so the last width (16) must not exceed "
                  "widths[0] (8)"},
        RangeCase{{"train.record_steps=[0,200]"},
                  "--set train.record_steps=[0,200]: train.record_steps[1]: expected a step in "
                  "[-200, 200) (0 is the first step, -1 the last), found 200"},
        RangeCase{{"train.record_steps=[-201]"},
                  "--set train.record_steps=[-201]: train.record_steps[0]: expected a step in "
                  "[-200, 200) (0 is the first step, -1 the last), found -201"},
        RangeCase{{"train.nesterov=true"},
                  "--set train.nesterov=true: train.nesterov: Nesterov momentum needs optimizer "
                  "= \"sgd\" and momentum > 0 (as torch.optim.SGD requires), found optimizer = "
                  "\"adam\", momentum = 0.0"},
        RangeCase{{"train.optimizer=rmsprop", "train.momentum=0.9"},
                  "--set train.momentum=0.9: train.momentum: optimizer = \"rmsprop\" is trained "
                  "without momentum here, found 0.9; set train.momentum = 0 (RMSprop with "
                  "momentum is not modelled yet)"},
        RangeCase{{"train.eps_in_sqrt=true"},
                  "--set train.eps_in_sqrt=true: train.eps_in_sqrt: only rmsprop and adagrad "
                  "read it, found optimizer = \"adam\"; remove it; Adam's eps inside the square "
                  "root is train.eps_root"},
        RangeCase{{"train.clip_placement=before_mean"},
                  "--set train.clip_placement=before_mean: train.clip_placement: "
                  "clip_placement = \"before_mean\" places a clipping the case does not do: set "
                  "train.clip_grad_norm > 0, or leave clip_placement out"},
        RangeCase{{"train.rms_decay=1"},
                  "--set train.rms_decay=1: train.rms_decay: expected a value in [0, 1), found "
                  "1.0"},
        RangeCase{{"data.drop_last=true", "data.per_replica_batch=8000"},
                  "--set data.per_replica_batch=8000: data.per_replica_batch: with drop_last "
                  "each replica gets 7500 samples per epoch, fewer than one batch of 8000; use "
                  "a smaller batch, more samples, or drop_last = false"}));

// A rule that ties two keys together points at the key to change; here the loss in the file
// no longer fits the dataset the override chose.
TEST(CaseSpec, CrossFieldErrorPointsAtTheOtherKey) {
  CaseDir dir;
  const std::string file =
      dir.write("t", "[model]\nwidths = [784, 10]\nloss = \"softmax_cross_entropy\"\n");
  EXPECT_EQ(load_error(file, {"data.dataset=synthetic-linear"}),
            "model.loss: synthetic-linear has real-valued targets; expected mse, found "
            "softmax_cross_entropy at " + file + ":3:8");
}

TEST(CaseSpec, ErrorAboutADefaultedKeyNamesTheFile) {
  CaseDir dir;
  // per_replica_batch is absent (default 64): the error can only point at the file.
  const std::string file = dir.write(
      "t", "[model]\nwidths = [16, 4]\nloss = \"mse\"\n[data]\ndataset = \"synthetic-linear\"\n"
           "synthetic_num_samples = 100\ndrop_last = true\n");
  EXPECT_EQ(load_error(file),
            "data.per_replica_batch: with drop_last each replica gets 12 samples per epoch, fewer "
            "than one batch of 64 at " + file +
                "; use a smaller batch, more samples, or drop_last = false");
}

TEST(CaseSpec, NameMustMatchFileStem) {
  CaseDir dir;
  const std::string file =
      dir.write("right", "[case]\nname = \"wrong\"\n[model]\nwidths = [784, 10]\n");
  EXPECT_EQ(load_error(file), "case.name: expected 'right' (the file name without .toml), found "
                              "'wrong' at " + file + ":2:8; rename the file or the case so that "
                              "they agree");
}

TEST(CaseSpec, MissingWidthsIsAnError) {
  CaseDir dir;
  const std::string file = dir.write("t", "[train]\nsteps = 3\n");
  EXPECT_EQ(load_error(file), "model.widths is required: the layer widths from input to output, "
                              "for example widths = [784, 256, 10] at " + file +
                              "; or describe the model with model.layers (docs/model-layers.md)");
}

TEST(CaseSpec, MissingCaseListsAvailableNames) {
  const std::string message = load_error("mlp2-fmnst");
  EXPECT_EQ(message.rfind("unknown case 'mlp2-fmnst'; available cases in " +
                              cases_dir().string() + ": ", 0), 0u) << message;
  EXPECT_NE(message.find("linear1024-mse, m1-initialisers"), std::string::npos) << message;
  EXPECT_NE(message.find("mlp-fmnist-dropout, mlp2-fmnist, mlp4-1024"), std::string::npos)
      << message;
  EXPECT_NE(message.find("; did you mean 'mlp2-fmnist'?"), std::string::npos) << message;
  EXPECT_EQ(load_error("/nonexistent/x.toml"), "case file /nonexistent/x.toml not found");
}

// The engine records one process's dropout masks and both producers draw one mask per step:
// the case refuses either combination when it loads, naming the key and the fix, where the
// engine's workers refused it after they had started.
TEST(CaseSpec, DropoutIsRefusedInSeveralProcessesOrWithMicroBatches) {
  EXPECT_THAT(
      load_error("mlp-fmnist-dropout", {"parallel.processes=2"}),
      ::testing::AllOf(::testing::HasSubstr("--set parallel.processes=2: parallel.processes: with "
                                            "dropout the engine records the masks of one process's "
                                            "devices only, yet, found 2 processes"),
                       ::testing::HasSubstr("set parallel.processes = 1")));
  EXPECT_THAT(load_error("mlp-fmnist-dropout", {"train.grad_accum_steps=2"}),
              ::testing::HasSubstr("train.grad_accum_steps: with dropout both producers draw "
                                   "one mask per step, not one per micro-batch"));
  EXPECT_EQ(load_error("mlp-fmnist-dropout", {"parallel.processes=2", "model.layers[2].rate=0"}),
            "");
}

}  // namespace
}  // namespace parity
