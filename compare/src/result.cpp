#include "parity/compare/result.h"

namespace parity::compare {

int exit_code(Verdict verdict) {
  switch (verdict) {
    case Verdict::kEquivalent:
      return 0;
    case Verdict::kNotEquivalent:
      return 1;
    case Verdict::kIncomplete:
      return 3;
    case Verdict::kInconclusive:
      return 5;
  }
  return 3;
}

}  // namespace parity::compare
