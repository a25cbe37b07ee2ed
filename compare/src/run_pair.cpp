#include "checks.h"

namespace parity::compare {

// Both step lists are strictly increasing (read_run_dir checks it), so one merge walk lines them
// up.
RunPair pair_runs(const RunDir& a, const RunDir& b) {
  RunPair runs{a, b, {}, {}, {}};
  size_t i = 0;
  size_t j = 0;
  while (i < a.steps.size() || j < b.steps.size()) {
    if (j == b.steps.size() || (i < a.steps.size() && a.steps[i].step < b.steps[j].step)) {
      runs.only_a.push_back(a.steps[i++].step);
    } else if (i == a.steps.size() || b.steps[j].step < a.steps[i].step) {
      runs.only_b.push_back(b.steps[j++].step);
    } else {
      runs.common.push_back({&a.steps[i++], &b.steps[j++]});
    }
  }
  return runs;
}

}  // namespace parity::compare
