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

}  // namespace parity::cli
