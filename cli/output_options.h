// The check of every option naming where a command writes (--out, --report, --work): an empty
// value is refused when the command line is parsed (exit 2), as it would write into the current
// folder. What is refused about the path itself (a link, a file that exists) is
// parity/common/output_path.h's, checked when the command runs.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace parity::cli {

CLI::Validator output_name();

// --report DIR and --overwrite as compare and gate take them; `earlier` names what wrote the
// reports an --overwrite replaces ("comparison", "gate").
void add_report_options(CLI::App* command, std::string& report, bool& overwrite,
                        const std::string& earlier);

}  // namespace parity::cli
