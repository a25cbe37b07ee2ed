// run.json <-> RunInfo: what the writer writes, and what the reader accepts (the format and schema
// first, then every key's type and range); errors name the file.
#pragma once

#include <string>

#include "json_fields.h"
#include "parity/common/run_dir.h"

namespace parity {

Json run_info_to_json(const RunInfo& info);
// `document` is run.json's, parsed; `where` names the file in errors.
RunInfo run_info_from_json(const Json& document, const std::string& where);

}  // namespace parity
