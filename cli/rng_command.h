// `parity rng`: JAX's threefry PRNG from the command line (pmap_engine::random), for checking a
// key, a split or a sample against a JAX session. Each subcommand prints only its result, as
// JSON, on stdout:
//   parity rng key 42                          [0, 42]
//   parity rng split 0,42 --num 3              [[a, b], [c, d], [e, f]]
//   parity rng fold-in 0,42 7                  [a, b]
//   parity rng bits|uniform|normal 0,42 --shape 2,3   nested lists of that shape
// with --partitionable true|false (default: JAX's current default, true).
#pragma once

#include <CLI/CLI.hpp>

namespace parity::cli {

void register_rng_command(CLI::App& app);

}  // namespace parity::cli

// main.cpp calls it unqualified, like a free function of the executable.
using parity::cli::register_rng_command;
