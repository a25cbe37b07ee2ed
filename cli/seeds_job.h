// parity run CASE --seeds N: the case trained N times by each producer, seed K's runs with the
// case's seeds (compare.seed_keys) + K, and the two sets judged by their final values'
// distributions (compare/seed_sets.h); the engine's runs with the case's
// scenario.engine_overrides, as run_case_job's (case_job.h). Under
//   DIR/init.safetensors              the initial parameters, unless init.seed varies: then
//   DIR/seeds/init/seed-K.safetensors   each seed's
//   DIR/seeds/pmap/seed-K/            the engine's runs (set A, under test)
//   DIR/seeds/ddp/seed-K/             ddp_ref's runs (set B, the reference)
//   DIR/init-engine.safetensors       (or seeds/init/seed-K-engine.safetensors) the engine's,
//                                       when its overrides change [init]
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "parity/compare/seed_sets.h"

namespace parity::cli {

struct SeedsJob {
  std::string case_name;
  std::vector<std::string> overrides;      // both producers
  std::vector<std::string> ddp_overrides;  // ddp_ref's runs only, after `overrides`
  int64_t seeds = 0;
  std::filesystem::path dir;  // OUT/CASE
};

// Trains and compares; removes DIR/seeds first (the job owns DIR, and a set must not keep an
// earlier job's extra seeds). InputError for a case the job cannot train over seeds (its
// reference is not ddp_ref, or ddp_overrides change init.*: both sets start from one init).
compare::ComparisonResult run_seeds_job(const SeedsJob& job,
                                        const compare::SeedSetOptions& options,
                                        const std::string& progress_label);

}  // namespace parity::cli
