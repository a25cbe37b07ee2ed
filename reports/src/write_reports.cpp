#include <string>
#include <utility>

#include "atomic_write.h"
#include "parity/reports/reports.h"

namespace parity::reports {

void write_reports(const compare::ComparisonResult& result, const std::filesystem::path& dir) {
  // Render everything before touching the disk: a renderer that throws leaves no file behind.
  const std::pair<const char*, std::string> files[] = {
      {kHtmlFile, render_html(result)},
      {kMarkdownFile, render_markdown(result)},
      {kJsonFile, render_json(result)},
      {kJunitFile, render_junit(result)},
  };
  create_report_directory(dir);
  for (const auto& [name, contents] : files) write_file_atomically(dir / name, contents);
}

}  // namespace parity::reports
