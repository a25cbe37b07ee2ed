#include "atomic_write.h"
#include "parity/common/output_path.h"
#include "parity/reports/reports.h"

namespace parity::reports {

void remove_reports(const std::filesystem::path& dir) {
  remove_report_files(dir, {kHtmlFile, kMarkdownFile, kJsonFile, kJunitFile});
}

void check_report_files(const std::filesystem::path& dir, const std::string& option,
                        bool overwrite) {
  for (const char* name : {kHtmlFile, kMarkdownFile, kJsonFile, kJunitFile}) {
    check_output_file(dir / name, option, overwrite);
  }
}

void write_reports(const compare::ComparisonResult& result, const std::filesystem::path& dir) {
  // Render everything before touching the disk: a renderer that throws leaves no file behind.
  write_report_files(dir, {
                              {kHtmlFile, render_html(result)},
                              {kMarkdownFile, render_markdown(result)},
                              {kJsonFile, render_json(result)},
                              {kJunitFile, render_junit(result)},
                          });
}

}  // namespace parity::reports
