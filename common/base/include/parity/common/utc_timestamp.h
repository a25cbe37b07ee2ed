// The time stamps parity writes (run.json's started_at, reports, a folder lock's holder, the
// workers' log): ISO 8601 in UTC, to the second.
#pragma once

#include <string>

namespace parity {

// ISO 8601 UTC "2026-12-02T16:30:00Z" for now.
std::string utc_timestamp_now();

}  // namespace parity
