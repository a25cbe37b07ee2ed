// The report's step-by-step charts, each an HTML <figure> around an inline SVG.
#pragma once

#include <string>

#include "parity/compare/result.h"

namespace parity::reports {

// Loss of A and B; |Δloss| against the tolerance (log scale); gradient-norm ratio; per-replica
// divergence (log scale); throughput and peak memory as bars.
std::string charts_html(const compare::ComparisonResult& result);

}  // namespace parity::reports
