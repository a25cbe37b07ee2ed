#include "markdown_parts.h"

namespace parity::reports {

using compare::CheckStatus;

const char* status_icon(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "✅";
    case CheckStatus::kFail:
      return "❌";
    case CheckStatus::kWarn:
      return "⚠️";
    case CheckStatus::kNotRecorded:
      return "➖";
  }
  return "❔";
}

std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows) {
  const auto line = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const std::string& cell : cells) out += " " + cell + " |";
    return out + "\n";
  };
  std::string out = line(header) + line(std::vector<std::string>(header.size(), "---"));
  for (const auto& row : rows) out += line(row);
  return out + "\n";
}

}  // namespace parity::reports
