// Diagnosis: rules that map the checks' findings to a known cause from the pitfall catalogue
// (docs/pitfalls.md), each with the figures that matched and the fix. Rules run in the order a
// cause propagates: a non-finite number or a data mismatch explains everything after it, so
// those come first; a rule that would only restate an earlier one's symptom stays silent.
//
//   P10  a loss or gradient became non-finite           first non-finite step and run
//   P3   the loss psum'd inside the differentiated fn    step-0 loss ratio = N (or 1/N)
//   P2   gradients summed, not averaged                  global grad norm ratio = N (or 1/N)
//   P8   devices fed the same samples                   one run repeats more samples within a
//                                                        step, and the samples digests differ
//   S6   different samples per step                     samples digests differ
//   P5   one key on every device (R1: torch's seed)     replicas' dropout masks identical
//   R2   a key reused across steps                      a replica's mask repeats at a site
//   P4   replicas started different                     digests diverge, loss differs at step 0
//   P11  replicas drifted apart                          digests diverge, step-0 loss agrees
//   P9   an update between micro-batches                 grad_accum_steps > 1, loss and
//                                                        gradients differ at step 0, same samples
//   S1   different initial parameters (or model)        loss differs at step 0, same samples
//   S1   different optimizer semantics                  step-0 gradients agree, the update or
//                                                        the learning rate does not
//   S1   rounding differences grew                      step-0 gradients and update agree,
//                                                        later steps part
// The rules of the framework defaults (M1-M7, M9-M14: default_rules.h) run before the S1 rule
// each is an instance of.
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "case_toml.h"
#include "checks.h"
#include "default_rules.h"
#include "figures.h"

namespace parity::compare {
namespace {

// How close a ratio A/B (gradient norms, losses) must be to N (or 1/N), relatively, to call one
// side a sum over the N replicas: the engines differ by rounding (~1e-7), a sum by a factor N.
constexpr double kSumRatioTolerance = 1e-3;

std::optional<NormRatio> gradient_norm_ratio(const RunPair& runs, const Findings& findings) {
  if (findings.grad_norm_ratio) return findings.grad_norm_ratio;
  for (const StepPair& pair : runs.common) {
    if (pair.b->grad_norm > 0 && std::isfinite(pair.a->grad_norm)) {
      return NormRatio{pair.step(), pair.a->grad_norm / pair.b->grad_norm, "metrics grad_norm"};
    }
  }
  return std::nullopt;
}

bool near(double value, double target) {
  return std::abs(value - target) <= kSumRatioTolerance * target;
}

// "A" when the ratio A/B is the replica count, "B" when it is its inverse, else empty.
std::string summed_run(double ratio, int64_t replicas) {
  const auto count = static_cast<double>(replicas);
  if (near(ratio, count)) return "A";
  if (near(ratio, 1 / count)) return "B";
  return "";
}

std::optional<Diagnosis> non_finite_rule(const RunPair& runs, const Findings& findings) {
  if (!findings.first_non_finite) return std::nullopt;
  const NonFinite& found = *findings.first_non_finite;
  const RunDir& run = found.run == "A" ? runs.a : runs.b;
  return Diagnosis{
      "P10", "Loss or gradient overflowed (not finite)",
      fmt::format("run {} ({}, dtype {}), step {}: {}", found.run, run.info.producer,
                  run.info.dtype, found.step, found.what),
      "Compute the loss in float32 (cast the logits up before the softmax and the mean), clip "
      "gradients by global norm, use loss scaling with float16, lower the learning rate, and "
      "check that step's input data."};
}

// A loss psum'd inside the function given to grad is N times the mean loss: the recorded loss
// itself is the tell, already at the first step. What the gradient becomes depends on the
// transformation, which the gradient norm ratio tells apart: under pmap (and shard_map with
// check_vma=False) psum transposes to psum, so each device's gradient is N times its local one
// and the replicas part; under shard_map with check_vma=True the replicated parameters are
// pvary'd and pvary transposes to psum_invariant (jax/_src/lax/parallel.py
// _pvary_transpose_rule), so every device's gradient is the sum over devices, exactly N times
// the mean.
std::optional<Diagnosis> summed_loss_rule(const RunPair& runs, const Findings& findings) {
  if (findings.replicas < 2 || runs.common.empty()) return std::nullopt;
  const StepPair& first = runs.common.front();
  if (first.b->loss == 0 || !std::isfinite(first.a->loss)) return std::nullopt;
  const double ratio = first.a->loss / first.b->loss;
  const std::string summed = summed_run(ratio, findings.replicas);
  if (summed.empty()) return std::nullopt;
  const std::optional<NormRatio> gradients = gradient_norm_ratio(runs, findings);
  if (gradients && summed_run(gradients->ratio, findings.replicas) == summed) {
    return Diagnosis{
        "P3", "Loss summed over devices inside the differentiated function",
        fmt::format("at step {} the loss ratio A/B is {:.6f} and the global gradient norm ratio "
                    "{:.6f} ({}) with {} replicas: run {}'s loss is the sum over devices and its "
                    "gradient the sum of all devices' gradients, as jax.shard_map with "
                    "check_vma=True computes it for replicated parameters",
                    first.step(), ratio, gradients->ratio, gradients->source, findings.replicas,
                    summed),
        "Average the loss instead of summing it: loss = jax.lax.pmean(loss_fn(params, x, y), "
        "axis_name) inside the differentiated function; under shard_map with check_vma=True "
        "the gradient of replicated parameters is already reduced over the devices, so no "
        "reduction follows grad."};
  }
  return Diagnosis{
      "P3", "Loss summed over devices inside the differentiated function",
      fmt::format("at step {} the loss ratio A/B is {:.6f} with {} replicas: run {}'s loss is "
                  "the sum over devices (psum inside the loss function), and then each device's "
                  "gradient is {} times its local one, not the mean of all devices' gradients",
                  first.step(), ratio, findings.replicas, summed, findings.replicas),
      "Differentiate the local loss and reduce afterwards: grads = jax.grad(loss_fn)(params, x, "
      "y); grads = jax.lax.pmean(grads, axis_name). psum's transpose is psum, so a psum inside "
      "grad scales every device's gradient by the device count."};
}

// Summed gradients have two causes the runs cannot tell apart: a psum without the division, or
// a pmap step (grad, then pmean) moved into shard_map(check_vma=True), where grad already sums
// the replicated parameters' gradients and pmean keeps the sum (case P3c). The fix names both.
std::optional<Diagnosis> summed_gradients_rule(const RunPair& runs, const Findings& findings) {
  const std::optional<NormRatio> ratio = gradient_norm_ratio(runs, findings);
  if (!ratio || findings.replicas < 2) return std::nullopt;
  const std::string summed = summed_run(ratio->ratio, findings.replicas);
  if (summed.empty()) return std::nullopt;
  return Diagnosis{
      "P2", "Gradients summed, not averaged",
      fmt::format("the global gradient norm ratio A/B at step {} is {:.6f} ({}) with {} replicas: "
                  "run {}'s gradients are the sum over replicas, not the mean",
                  ratio->step, ratio->ratio, ratio->source, findings.replicas, summed),
      "Average the gradients over the device axis: grads = jax.lax.pmean(grads, axis_name) (or "
      "psum, then divide by the axis size), as DDP's all-reduce averages them. If the step "
      "already pmeans them inside jax.shard_map with check_vma=True, grad has summed the "
      "replicated parameters' gradients and the pmean keeps the sum: pmean the loss inside "
      "grad instead and reduce nothing after it."};
}

std::optional<Diagnosis> data_rule(const Findings& findings) {
  if (!findings.first_sample_mismatch) return std::nullopt;
  const int64_t step = *findings.first_sample_mismatch;
  if (const auto& excess = findings.first_duplicate_excess; excess && excess->step <= step) {
    return Diagnosis{
        "P8", "Devices fed the same samples (data not sharded by process)",
        fmt::format("run {} repeats {} samples within the global batch of step {} where the other "
                    "run repeats {}, and the global sample ids differ from step {} "
                    "(duplicate_samples, samples_digest)",
                    excess->run, excess->repeats, excess->step, excess->other_repeats, step),
        "Shard the data by process before splitting it over local devices: process p of "
        "jax.process_count() reads shard jax.process_index() (DDP: global rank = process * "
        "local devices + local device, DistributedSampler(num_replicas=world, rank=that))."};
  }
  std::string evidence =
      fmt::format("the global sample ids differ from step {} (samples_digest)", step);
  if (findings.first_loss_mismatch && *findings.first_loss_mismatch >= step) {
    evidence += fmt::format(", and the losses part at step {}", *findings.first_loss_mismatch);
  }
  return Diagnosis{
      "S6", "Different data order or sharding", evidence,
      "Give device d exactly the samples DDP rank d reads: a permutation seeded with seed + "
      "epoch, padded to a multiple of the world size, indices[d::world], batched per device; in "
      "multi-process runs shard by process index (P8)."};
}

// P5 (jax.random keys) or R1 (torch's generator): replicas drew identical dropout masks.
std::optional<Diagnosis> shared_masks_rule(const Findings& findings) {
  if (!findings.shared_replica_masks) return std::nullopt;
  const Findings::SharedMasks& shared = *findings.shared_replica_masks;
  const std::string evidence = fmt::format(
      "run {}: at step {}, site {}, replicas {} drew identical dropout masks, agreeing on 100% "
      "of {} elements where independent draws agree on {:.1f}% (rng.jsonl)",
      shared.run, shared.step, shared.site, format_steps(shared.replicas, 8), shared.elements,
      100 * shared.expected_agreement);
  if (shared.keyed) {
    return Diagnosis{
        "P5", "Same PRNG key on every device", evidence,
        "Give every device its own key inside the pmapped step: key = jax.random.fold_in(key, "
        "jax.lax.axis_index('data')) (or pass jax.random.split(key, n) with in_axes=0), and fold "
        "in the step as well (002 §2.1, §4.4)."};
  }
  return Diagnosis{
      "R1", "torch.manual_seed(seed) on every rank", evidence,
      "Seed each rank's generator differently, torch.manual_seed(seed + rank) (or a "
      "torch.Generator per rank for dropout): with one seed every rank drops the same units "
      "(transformers #31412, accelerate #114, timm #1519)."};
}

// R2: a replica drew a mask again at a later step.
std::optional<Diagnosis> reused_stream_rule(const Findings& findings) {
  if (!findings.repeated_mask) return std::nullopt;
  const Findings::RepeatedMask& repeated = *findings.repeated_mask;
  const std::string evidence = fmt::format(
      "run {}: replica {} drew the same dropout mask at site {} in step {} as in step {} "
      "(rng.jsonl digests)",
      repeated.run, repeated.replica, repeated.site, repeated.step, repeated.first_step);
  if (repeated.keyed) {
    return Diagnosis{"R2", "PRNG key reused across steps", evidence,
                     "Derive a fresh key every step: jax.random.fold_in(key, step), or split the "
                     "carried key each step and keep the new half (002 §4.4)."};
  }
  return Diagnosis{"R2", "Generator re-seeded every step", evidence,
                   "Seed the generator once before training, not inside the step loop: "
                   "torch.manual_seed in the loop restarts the stream every step."};
}

std::optional<Diagnosis> replica_rule(const RunPair& runs, const Findings& findings) {
  if (findings.divergences.empty()) return std::nullopt;
  const ReplicaDivergence& divergence = findings.divergences.front();
  const std::string where = fmt::format(
      "run {}: replica(s) {} hold other parameters than the rest from step {} "
      "(replicas/param_digests)",
      divergence.run, format_steps(divergence.replicas, 8), divergence.step);
  const bool differs_at_start = findings.first_loss_mismatch && !runs.common.empty() &&
                                *findings.first_loss_mismatch == runs.common.front().step();
  if (differs_at_start) {
    return Diagnosis{
        "P4", "Replicas started from different parameters",
        where + fmt::format(", and the loss differs already at step {}: the replicas' first "
                            "forward passes saw different parameters",
                            runs.common.front().step()),
        "Initialise the parameters once, outside the mapped function, from one key, and "
        "replicate them to every device (in_axes=None or jax.device_put_replicated); DDP "
        "broadcasts rank 0's parameters for this reason."};
  }
  return Diagnosis{
      "P11", "Replicas diverged after the update",
      where +
          ", while the first step's losses agree: the replicas started equal and applied "
          "different updates",
      "Reduce the gradients over the device axis (pmean) before the optimizer update and keep "
      "the optimizer state replicated, updated only from reduced gradients."};
}

// The number of micro-batches per optimizer step both runs' cases name (1 when either lacks it).
int64_t micro_batches(const RunPair& runs) {
  const auto of = [](const RunDir& run) {
    const std::map<std::string, std::string> keys = case_keys(run);
    const auto found = keys.find("train.grad_accum_steps");
    return found == keys.end() ? int64_t{1} : std::stoll(found->second);
  };
  const int64_t a = of(runs.a);
  return a == of(runs.b) ? a : 1;
}

// With k micro-batches a step, an optimizer update inside the accumulation loop changes the
// parameters the later micro-batches see: the step-0 loss (their mean) and its gradients differ
// already, on the same samples. Different initial parameters look the same from the recorded
// figures, so the evidence says so; the accumulation order is the likelier mistake to check.
std::optional<Diagnosis> accumulation_rule(const RunPair& runs, const Findings& findings) {
  const int64_t k = micro_batches(runs);
  if (k < 2 || !findings.first_loss_mismatch || runs.common.empty() ||
      *findings.first_loss_mismatch != runs.common.front().step() ||
      findings.first_grads_match != false) {
    return std::nullopt;
  }
  const StepPair& first = runs.common.front();
  return Diagnosis{
      "P9", "Optimizer update inside the gradient accumulation loop",
      fmt::format("both cases accumulate {} micro-batches per step, and at step {} the loss (A {} "
                  "vs B {}) and the accumulated gradients already differ although both read the "
                  "same samples: an update between micro-batches changes what the later ones "
                  "see (different initial parameters would look the same; check the "
                  "accumulation order first)",
                  k, first.step(), first.a->loss, first.b->loss),
      "Accumulate the gradients of all micro-batches first (grad_accum = tree.map(add, "
      "grad_accum, grads)), reduce them once, and call optimizer.update once per step; the "
      "optimizer state must not change between micro-batches (DDP: no_sync() for all but the "
      "last micro-batch)."};
}

std::optional<Diagnosis> initial_parameters_rule(const RunPair& runs, const Findings& findings) {
  if (!findings.first_loss_mismatch || runs.common.empty()) return std::nullopt;
  const StepPair& first = runs.common.front();
  if (*findings.first_loss_mismatch != first.step()) return std::nullopt;
  return Diagnosis{
      "S1", "Different initial parameters (or model)",
      fmt::format("the loss differs already at step {} (A {} vs B {}) although both read the "
                  "same samples: the first forward pass saw different parameters or a "
                  "different model",
                  first.step(), first.a->loss, first.b->loss),
      "Start both runs from the same parameters (the same --init file, made once by parity "
      "init) and the same model definition."};
}

// The first step whose learning rate differs (relatively, beyond float rounding): a schedule
// counting steps differently, or another base rate.
std::optional<StepPair> first_lr_mismatch(const RunPair& runs) {
  constexpr double kLrRtol = 1e-6;
  for (const StepPair& pair : runs.common) {
    if (std::abs(pair.a->lr - pair.b->lr) > kLrRtol * std::abs(pair.b->lr)) return pair;
  }
  return std::nullopt;
}

// The step where the runs first part in loss or tensors, when they part at all.
std::optional<int64_t> first_parting(const Findings& findings) {
  std::optional<int64_t> parted = findings.first_tensor_mismatch;
  if (findings.first_loss_mismatch && (!parted || *findings.first_loss_mismatch < *parted)) {
    parted = findings.first_loss_mismatch;
  }
  return parted;
}

// Same gradients at the first recorded step, but a different update: the parameters after that
// step already disagree, or the learning rates do. Every optimizer difference of the catalogue
// (eps placement, weight decay coupling, Nesterov form, clipping order) shows in the first update.
std::optional<Diagnosis> optimizer_rule(const RunPair& runs, const Findings& findings) {
  if (findings.first_grads_match != true) return std::nullopt;
  const std::optional<StepPair> lr = first_lr_mismatch(runs);
  std::string evidence;
  if (lr) {
    evidence = fmt::format("the learning rates differ from step {} (A {} vs B {})", lr->step(),
                           lr->a->lr, lr->b->lr);
  } else if (findings.first_params_match == false) {
    evidence =
        "the reduced gradients agree at the first recorded step, but the parameters "
        "after that step's update do not: same data and gradients, different update";
  } else {
    return std::nullopt;
  }
  return Diagnosis{
      "S1", "Different optimizer semantics", evidence,
      "Match the optimizer's semantics: Adam's eps outside the square root with bias "
      "correction (optax.adam(eps=1e-8, eps_root=0) is torch.optim.Adam), SGD momentum without "
      "dampening and the same Nesterov form, weight decay added to the gradient (torch Adam, "
      "SGD) or decoupled (AdamW; optax.adamw), the schedule's step count, the clipping order, "
      "and one update per accumulated step (P9)."};
}

// Gradients and parameters agree after the first update, yet the runs part later: no semantic
// difference showed where one would, and a difference that starts at rounding level and grows
// step by step is what a chaotic loss surface does to two reduction orders.
std::optional<Diagnosis> drift_rule(const RunPair& runs, const Findings& findings) {
  const std::optional<int64_t> parted = first_parting(findings);
  if (findings.first_grads_match != true || findings.first_params_match != true || !parted ||
      runs.common.empty()) {
    return std::nullopt;
  }
  const StepPair& first = runs.common.front();
  const StepPair* parting = &first;
  const StepPair* worst = &first;
  for (const StepPair& pair : runs.common) {
    if (pair.step() == *parted) parting = &pair;
    if (std::abs(pair.a->loss - pair.b->loss) > std::abs(worst->a->loss - worst->b->loss))
      worst = &pair;
  }
  auto gap = [](const StepPair& pair) {
    return format_number(std::abs(pair.a->loss - pair.b->loss));
  };
  return Diagnosis{
      "S1", "Rounding differences grew over the steps",
      fmt::format("gradients and parameters agree after the update of step {}, but the |loss "
                  "difference| grows from {} at step {} to {} at step {}, where the runs part, "
                  "and {} at step {}",
                  first.step(), gap(first), first.step(), gap(*parting), parting->step(),
                  gap(*worst), worst->step()),
      "No semantic difference shows at the first step. Record tensors at more steps "
      "(train.record_steps) to find the first update that differs, compare both runs against "
      "a higher-precision oracle run, or judge long runs with the approximate lane "
      "(allowed bad steps) or a looser loss tolerance."};
}

// The earliest step at which any check saw the runs differ.
std::optional<int64_t> first_difference(const Findings& findings) {
  std::optional<int64_t> first;
  auto consider = [&first](std::optional<int64_t> step) {
    if (step && (!first || *step < *first)) first = step;
  };
  consider(findings.first_loss_mismatch);
  consider(findings.first_tensor_mismatch);
  consider(findings.first_sample_mismatch);
  for (const ReplicaDivergence& divergence : findings.divergences) consider(divergence.step);
  return first;
}

}  // namespace

std::vector<Diagnosis> diagnose_rng_streams(const Findings& findings) {
  std::vector<Diagnosis> diagnoses;
  for (std::optional<Diagnosis> diagnosis :
       {shared_masks_rule(findings), reused_stream_rule(findings)}) {
    if (diagnosis) diagnoses.push_back(std::move(*diagnosis));
  }
  return diagnoses;
}

std::vector<Diagnosis> diagnose(const RunPair& runs, const Findings& findings) {
  std::vector<Diagnosis> diagnoses;
  // Records a rule's diagnosis; returns whether the rule matched.
  auto add = [&diagnoses](std::optional<Diagnosis> diagnosis) {
    if (!diagnosis) return false;
    diagnoses.push_back(std::move(*diagnosis));
    return true;
  };
  if (add(non_finite_rule(runs, findings))) {
    // Differences from the non-finite step on are its consequences, not further causes.
    const std::optional<int64_t> first = first_difference(findings);
    if (!first || *first >= findings.first_non_finite->step) return diagnoses;
  }
  if (add(summed_loss_rule(runs, findings))) return diagnoses;
  if (add(summed_gradients_rule(runs, findings))) return diagnoses;
  if (add(data_rule(findings))) return diagnoses;
  // Masks drawn wrongly change every loss from the first step on, which the rules below would
  // read as other causes.
  const std::vector<Diagnosis> streams = diagnose_rng_streams(findings);
  if (!streams.empty()) {
    diagnoses.insert(diagnoses.end(), streams.begin(), streams.end());
    return diagnoses;
  }
  if (add(replica_rule(runs, findings))) return diagnoses;
  if (add(accumulation_rule(runs, findings))) return diagnoses;
  // The framework defaults (default_rules.h) before the generic causes they are instances of.
  if (add(initialiser_rule(runs, findings))) return diagnoses;
  if (add(diverging_layer_rule(runs, findings))) return diagnoses;
  // A loss offset from the first step with nearly equal gradients (M11), which the next rule
  // would read as another model.
  if (add(label_smoothing_rule(runs, findings))) return diagnoses;
  if (add(batch_norm_sync_rule(runs, findings))) return diagnoses;
  if (add(initial_parameters_rule(runs, findings))) return diagnoses;
  // Runs that agree within the tolerances get no diagnosis, even where a rule would measure a
  // difference below them.
  if (!first_parting(findings)) return diagnoses;
  if (add(clip_placement_rule(runs, findings))) return diagnoses;
  if (add(weight_decay_rule(runs, findings))) return diagnoses;
  if (add(rmsprop_defaults_rule(runs, findings))) return diagnoses;
  if (add(adagrad_defaults_rule(runs, findings))) return diagnoses;
  if (add(optimizer_rule(runs, findings))) return diagnoses;
  if (add(batch_norm_momentum_rule(runs, findings))) return diagnoses;
  add(drift_rule(runs, findings));
  return diagnoses;
}

}  // namespace parity::compare
