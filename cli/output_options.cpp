#include "output_options.h"

#include "parity/common/error.h"
#include "parity/common/output_path.h"

namespace parity::cli {

CLI::Validator output_name() {
  return CLI::Validator(
      [](const std::string& value) -> std::string {
        try {
          require_output_name(value, "the value");
        } catch (const InputError& error) {
          return error.what();
        }
        return "";
      },
      "PATH");
}

void add_report_options(CLI::App* command, std::string& report, bool& overwrite,
                        const std::string& earlier) {
  command
      ->add_option("--report", report,
                   "write report.html, report.md, report.json and junit.xml into this folder")
      ->check(output_name());
  command->add_flag("--overwrite", overwrite,
                    "replace the reports of an earlier " + earlier + " in the --report folder");
}

}  // namespace parity::cli
