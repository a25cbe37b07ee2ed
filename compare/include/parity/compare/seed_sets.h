// Comparing two sets of runs over seeds (parity run --seeds, parity compare --seeds): N runs of
// each producer that differ only in their seeds, judged by the distributions of their final
// values rather than step by step. This is how runs whose RNG streams differ by design
// (PyTorch's and JAX's dropout masks can never agree) are compared: each final value (test
// loss, test accuracy) gets a two-sided equivalence test of the producers' means
// (seed_equivalence.h) at a stated margin.
//
//   ComparisonResult result = compare_seed_set_dirs(seed_set_runs("seeds/pmap"),
//                                                   seed_set_runs("seeds/ddp"), {});
//
// The checks, in order:
//   case            within each set, every run trained the same case but for its seeds
//                   (rng.seed, data.seed, init.seed; bad input otherwise), each with seeds of
//                   its own; across the sets, the keys that differ (warning, or failure with
//                   require_same_case)
//   seeds_METRIC    one per final value every run recorded: test_loss and test_accuracy when the
//                   runs evaluated, else final_loss. Pass: equivalent within the margin; fail:
//                   different (Welch's test rejects equal means and TOST does not reject a
//                   difference of at least the margin); warning: inconclusive
//   rng             the RNG check of each seed's pair of runs (seed i of A with seed i of B), the
//                   first failing pair reported
//
// The verdict: incomplete when a run did not finish; not equivalent when a check fails;
// inconclusive when a final value is; else equivalent.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "parity/common/run_dir.h"
#include "parity/compare/result.h"

namespace parity::compare {

// A margin the options leave unset is run B's case's (compare.seeds_loss_margin,
// compare.seeds_accuracy_margin; their defaults when B's case text leaves them out): a loss in
// its own units (cross-entropy in nats), an accuracy as a fraction, 0.01 one percentage point.
struct SeedSetOptions {
  std::optional<double> loss_margin;      // test_loss and final_loss
  std::optional<double> accuracy_margin;  // test_accuracy
  double alpha = 0.05;                    // each one-sided test's level: a 90% interval
  // The two sets must have trained the same case but for the seeds (else the case check only
  // warns: a deliberate difference, such as another learning rate, is what a user may test).
  bool require_same_case = false;
};

// The run directories of one set: the subfolders of `folder` that hold a run.json, sorted by
// name with numbers in numeric order (seed-2 before seed-10). InputError naming the folder when
// it is missing or holds fewer than two.
std::vector<std::filesystem::path> seed_set_runs(const std::filesystem::path& folder);

// Judges set A (under test) against set B (the reference). InputError, naming the run, when a
// set is not one case over distinct seeds or has fewer than two runs, or when the runs of both
// sets share no final value to judge.
ComparisonResult compare_seed_sets(const std::vector<RunDir>& a, const std::vector<RunDir>& b,
                                   const SeedSetOptions& options);

// Reads every run directory (InputError naming the file on bad input) and compares the sets.
ComparisonResult compare_seed_set_dirs(const std::vector<std::filesystem::path>& a,
                                       const std::vector<std::filesystem::path>& b,
                                       const SeedSetOptions& options);

}  // namespace parity::compare
