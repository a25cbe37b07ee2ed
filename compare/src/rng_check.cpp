// RNG streams (dropout masks, augmentation keys; pitfall P5) are not recorded by any producer
// yet. The check says so rather than passing: a comparison must never claim what it did not see.
#include "checks.h"

namespace parity::compare {

Check check_rng() {
  Check check;
  check.id = "rng";
  check.title = "RNG streams";
  check.status = CheckStatus::kNotRecorded;
  check.summary =
      "No producer records RNG streams yet (keys, dropout masks), so there is nothing to compare.";
  return check;
}

}  // namespace parity::compare
