#include "html_parts.h"

#include <fmt/format.h>

#include "html_style.h"

namespace parity::reports {

using compare::CheckStatus;

const char* status_tone(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "tone-pass";
    case CheckStatus::kFail:
      return "tone-fail";
    case CheckStatus::kWarn:
      return "tone-warn";
    case CheckStatus::kNotRecorded:
      return "tone-none";
  }
  return "tone-none";
}

const char* status_mark(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "✓";
    case CheckStatus::kFail:
      return "✗";
    case CheckStatus::kWarn:
      return "!";
    case CheckStatus::kNotRecorded:
      return "–";
  }
  return "?";
}

std::string status_pill(CheckStatus status, const std::string& markup) {
  return fmt::format("<span class=\"status {}\">{} {}</span>", status_tone(status),
                     status_mark(status), markup);
}

std::string page_start(const std::string& title, const char* extra_css) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>"
      "<title>{}</title><style>{}{}</style></head><body>",
      title, kReportCss, extra_css);
}

}  // namespace parity::reports
