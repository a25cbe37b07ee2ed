// The report's step-by-step charts, each an HTML <figure> around an inline SVG.
#pragma once

#include <string>

#include "parity/compare/result.h"

namespace parity::reports {

// Loss of A and B; |Δloss| against the tolerance (log scale); gradient-norm ratio; per-replica
// divergence (log scale); throughput and peak memory as bars.
std::string charts_html(const compare::ComparisonResult& result);

// A comparison over seeds: for each final value, every seed's value of both producers, and the
// difference of their means with its interval against the equivalence margin.
std::string seed_charts_html(const compare::ComparisonResult& result);

}  // namespace parity::reports
