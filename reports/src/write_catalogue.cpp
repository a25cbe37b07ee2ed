#include "atomic_write.h"
#include "parity/reports/catalogue.h"

namespace parity::reports {

void write_catalogue_report(const std::vector<CatalogueEntry>& entries,
                            const std::filesystem::path& dir) {
  // Rendered before touching the disk, as write_reports does.
  write_report_files(dir, {
                              {kCatalogueHtmlFile, render_catalogue_html(entries)},
                              {kCatalogueMarkdownFile, render_catalogue_markdown(entries)},
                              {kCatalogueJsonFile, render_catalogue_json(entries)},
                          });
}

}  // namespace parity::reports
