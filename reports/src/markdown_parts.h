// Pieces of GitHub-flavoured Markdown that both Markdown reports use (a comparison's report.md
// and the catalogue's catalogue.md): the status icons and tables.
#pragma once

#include <string>
#include <vector>

#include "parity/compare/result.h"

namespace parity::reports {

// ✅ pass, ❌ fail, ⚠️ warn, ➖ not recorded.
const char* status_icon(compare::CheckStatus status);

// A table with a blank line after it; every cell is already escaped (markdown_escape), so none
// holds a line break or an unescaped '|'.
std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows);

}  // namespace parity::reports
