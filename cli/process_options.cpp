#include "process_options.h"

#include "numeric_options.h"

namespace parity::cli {

void add_process_options(CLI::App* command, ProcessArguments& arguments,
                         const std::string& nproc_help, const std::string& timeout_help) {
  command->add_option("--nproc", arguments.nproc, nproc_help)
      ->check(integer_in(1, kMaxCaseReplicas));
  command->add_option("--timeout", arguments.timeout_seconds, timeout_help)
      ->check(positive_number(kMaxTimeoutSeconds));
}

}  // namespace parity::cli
