#include "sample_catalogue.h"

#include <algorithm>

#include "sample_results.h"

namespace parity::testing {

using reports::CaseOutcome;
using reports::CatalogueEntry;

namespace {

std::string report_of(const std::string& case_name) {
  return "../" + case_name + "/report/report.html";
}

}  // namespace

std::vector<CatalogueEntry> sample_catalogue() {
  std::vector<CatalogueEntry> entries;
  CatalogueEntry s1;
  s1.id = "S1";
  s1.title = "Replicated data parallelism: DDP's all-reduce average and pmap's pmean";
  s1.case_name = "s1-replicated-data-parallel";
  s1.source = "000 §2.1, §4.3; 002 §2.1";
  s1.claim =
      "Each device holds the full parameters and computes gradients on its slice; DDP "
      "all-reduces and averages, pmap does grads = pmean(grads, axis) after grad; the updates are "
      "identical.";
  s1.verdict = "confirmed";
  s1.expected = "equivalent";
  s1.observed =
      "equivalent: A and B agree: losses within 4.5e-6 over 200 steps, replicas bit-identical.";
  s1.summary = "equivalent over 200 steps";
  s1.fact_check = "Confirmed: over 200 steps the losses agree within 4.5e-6.";
  s1.figures = {{"steps", "200"}, {"loss_curve.max_abs_error", "4.5e-06"}};
  s1.report_link = report_of("s1-replicated-data-parallel");
  entries.push_back(s1);

  CatalogueEntry s9;
  s9.id = "S9";
  s9.title = "Multi-process: processes x devices";
  s9.case_name = "s9-multi-process";
  s9.source = "002 §3.1-3.2";
  s9.claim =
      "jax.distributed.initialize with process_id/process_count, data sharded by process_index, "
      "equals one process with all devices; DDP uses RANK/WORLD_SIZE.";
  s9.verdict = "not checked";
  s9.expected = "not yet supported (missing: a multi-process engine)";
  s9.observed = s9.summary = "not run";
  s9.outcome = CaseOutcome::kNotSupported;
  entries.push_back(s9);

  CatalogueEntry p1;
  p1.id = "P1";
  p1.title = "pmap and psum with different axis names";
  p1.case_name = "p1-axis-name-mismatch";
  p1.source = "000 §5.1";
  p1.claim =
      "pmap(axis_name='batch') with psum(..., axis_name='devices') gives a NameError or a "
      "cryptic shape error.";
  p1.verdict = "confirmed";
  p1.expected = "error containing \"unbound axis name: devices\"";
  p1.observed = "error: Found an unbound axis name: devices.";
  p1.summary = p1.observed;
  p1.fact_check = "Confirmed: JAX raises a NameError naming the unbound axis.";
  p1.figures = {{"error", "Found an unbound axis name: devices."}};
  p1.report_link = report_of("p1-axis-name-mismatch");
  entries.push_back(p1);

  CatalogueEntry p2;
  p2.id = "P2";
  p2.title = "psum instead of pmean";
  p2.case_name = "p2-psum-not-pmean";
  p2.source = "000 §4.3, §7";
  p2.claim =
      "With psum and no division the gradients are the sum over devices, N times DDP's, and "
      "training gets worse.";
  p2.verdict = reports::kUnsettledVerdict;
  p2.expected = "not equivalent; diagnosis P2";
  p2.observed = "equivalent: A and B agree: losses within 3.1e-7 over 3 steps.";
  p2.summary = "equivalent over 3 steps";
  p2.fact_check = "Partly: the gradients are 8.000x DDP's at step 0.";
  p2.outcome = CaseOutcome::kDiffers;
  p2.report_link = report_of("p2-psum-not-pmean");
  entries.push_back(p2);

  CatalogueEntry p4;
  p4.id = "P4";
  p4.title = "Parameters initialised per device";
  p4.case_name = "p4-init-per-device";
  p4.source = "000 §4.4";
  p4.claim =
      "Initialising parameters inside the mapped function with per-device keys makes the "
      "replicas start different and the loss oscillate.";
  p4.verdict = "partly";
  p4.expected = "not equivalent; diagnosis P4";
  p4.observed = "not equivalent; diagnosis P4: A's replicas hold different parameters from step 0.";
  p4.summary = "not equivalent from step 0; diagnosis P4 (Parameters differ across replicas)";
  p4.fact_check = "Partly: with per-device keys the replicas differ from step 0.";
  p4.report_link = report_of("p4-init-per-device");
  entries.push_back(p4);

  CatalogueEntry p10;
  p10.id = "P10";
  p10.title = "fp16 loss without a cast";
  p10.case_name = "p10-fp16-loss-overflow";
  p10.source = "002 §3.4";
  p10.claim = "An fp16 loss without a cast to fp32 and without clipping overflows to inf/NaN.";
  p10.verdict = "not checked";
  p10.expected = "not yet supported (missing: train.dtype f16 in ddp_ref)";
  p10.observed = p10.summary = "not run";
  p10.outcome = CaseOutcome::kNotSupported;
  entries.push_back(p10);

  CatalogueEntry x1;
  x1.id = "X1";
  x1.title = "hostile " + kScript;
  x1.case_name = "x1-" + kPipe;
  x1.source = "source " + kPipe;
  x1.claim = "line one\nline two | " + kMarkdown;
  x1.verdict = "confirmed " + kScript;
  x1.expected = "expected " + kAmpersand + " " + kCdataEnd;
  x1.observed = "observed " + kInvalidUtf8 + " " + kControl;
  x1.summary = "summary " + kScript;
  x1.fact_check = "fact\r\ncheck " + kScript;
  x1.figures = {{"name " + kPipe, "value " + kScript + " " + kInvalidUtf8}};
  x1.report_link = kHostileLink;
  entries.push_back(x1);
  return entries;
}

std::vector<CatalogueEntry> passing_catalogue() {
  std::vector<CatalogueEntry> entries = sample_catalogue();
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [](const CatalogueEntry& entry) {
                                 return entry.outcome == CaseOutcome::kDiffers || entry.id == "X1";
                               }),
                entries.end());
  return entries;
}

}  // namespace parity::testing
