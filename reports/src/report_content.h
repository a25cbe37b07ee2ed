// What the human-readable reports (HTML, Markdown, terminal) show, as plain text, apart from the
// markup: the rows of the runs and versions tables, the cells of a worst-tensors row, a
// tolerance in words, the tally of check statuses. Each renderer escapes these for its format.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "parity/compare/result.h"

namespace parity::reports {

struct RunRow {
  std::string name;
  std::string a;
  std::string b;
  bool should_match = false;  // a difference between the runs is worth pointing out
};

// Directory, producer, status, case and hash, replicas, ..., host, start time.
std::vector<RunRow> run_rows(const compare::RunSummary& a, const compare::RunSummary& b);
// Every component either run names, sorted; "–" where a run does not name it.
std::vector<RunRow> version_rows(const compare::RunSummary& a, const compare::RunSummary& b);

// Headers and cells of a worst-tensors table: step, tensor, max |Δ|, rel L2, cosine, norm ratio,
// within tolerance. Column 1 (the name) is text, the others are numbers.
const std::vector<std::string>& tensor_columns();
std::vector<std::string> tensor_cells(const compare::TensorDelta& tensor);

// "rtol 1.3e-6, atol 1e-5, 0 steps allowed outside".
std::string tolerance_text(const compare::Tolerance& tolerance);

// "200 steps compared", or over seeds "8 seeds of A and 8 of B compared".
std::string compared_text(const compare::ComparisonResult& result);

// A comparison over seeds, one line per final value: "test loss: A 0.512, B 0.515, difference
// -0.003, 90% interval [-0.01, 0.004], margin ±0.02: equivalent".
std::vector<std::string> seed_distribution_lines(const compare::ComparisonResult& result);

// How many checks have each status, most severe first, statuses with no check left out.
std::vector<std::pair<compare::CheckStatus, size_t>> status_tally(
    const std::vector<compare::Check>& checks);

}  // namespace parity::reports
