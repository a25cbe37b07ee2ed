// The order in which a device runs a program, with every collective split in two as XLA's
// async collectives are (xla/service/async_collective_creator.cc turns all-reduce, all-gather,
// reduce-scatter, collective-permute into a *-start / *-done pair):
//   start  the device hands the collective its operands and goes on; the collective runs once
//          every device has started it (runtime/collective_rendezvous.h)
//   done   the device takes its results, waiting only if the collective has not run yet
// so that a device computes whatever does not need a collective's results while the
// collective waits for the other devices and runs.
//
// Where the pairs go (mapped_schedule), as XLA's latency hiding scheduler
// (xla/service/latency_hiding_scheduler.cc) moves a start early and its done late, with its
// default SchedulerConfig (latency_hiding_scheduler.h: all_gather_overlap_limit,
// reduce_scatter_overlap_limit, all_reduce_overlap_limit ... = 1): at most one collective of
// each kind in flight.
//   start  as early as its operands allow, but not before the previous collective of its kind
//          in the program (that one is done first): an FSDP layer's parameters are gathered
//          while the layer before it computes, not all at the program's start, which bounds
//          what the prefetched results add to the peak; nor before an earlier collective's
//          start, so that every device (and every process) starts them in the program's
//          order, and the collectives run in that order.
//   done   just before the first step that reads one of its results, or the next start of its
//          kind, whichever comes first (the end of the program for results nobody reads).
// Memory is counted in this order (runtime/device_run.h): a collective's results are live from
// its start (XLA's start allocates the output buffer) and its operands until its done.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/program.h"

namespace pmap_engine::runtime {

struct Step {
  enum class Kind { kRun, kStart, kDone };
  Kind kind = Kind::kRun;
  size_t equation = 0;
};

// The kind a collective counts as for the one-in-flight limit: XLA's resource for it
// (latency_hiding_scheduler.h ResourceType). psum, psum_invariant, pmax and pmin all lower to
// all-reduce; all_gather, reduce_scatter and ppermute (collective-permute) are kinds of their own.
inline std::string overlap_kind(const std::string& primitive) {
  if (primitive == "psum" || primitive == "psum_invariant" || primitive == "pmax" ||
      primitive == "pmin") {
    return "all-reduce";
  }
  return primitive;
}

// Every equation run in program order (a program without collectives).
inline std::vector<Step> sequential_schedule(const ir::Program& program) {
  std::vector<Step> steps;
  for (size_t e = 0; e < program.equations.size(); ++e) steps.push_back({Step::Kind::kRun, e});
  return steps;
}

// A mapped program's schedule: kernels run, collectives start and done, as above.
inline std::vector<Step> mapped_schedule(const ir::Program& program) {
  const size_t count = program.equations.size();
  std::vector<std::optional<size_t>> defined_by(program.vars.size());
  for (size_t e = 0; e < count; ++e) {
    for (int var : program.equations[e].outputs) defined_by[static_cast<size_t>(var)] = e;
  }

  // Where each collective starts: just before equation place[c] (place[c] <= c), and, per
  // kind, the collective of that kind before it.
  std::vector<std::vector<size_t>> starting_before(count);
  std::vector<std::optional<size_t>> previous_of_kind(count);
  std::map<std::string, size_t> last_of_kind;
  size_t earliest = 0;  // no earlier than the previous collective's start
  for (size_t c = 0; c < count; ++c) {
    const ir::Equation& equation = program.equations[c];
    if (equation.primitive->kernel) continue;  // not a collective
    size_t place = earliest;
    for (int var : equation.inputs) {
      const std::optional<size_t>& definition = defined_by[static_cast<size_t>(var)];
      if (definition) place = std::max(place, *definition + 1);
    }
    const std::string kind = overlap_kind(equation.primitive->name);
    auto previous = last_of_kind.find(kind);
    if (previous != last_of_kind.end()) {
      place = std::max(place, previous->second + 1);
      previous_of_kind[c] = previous->second;
    }
    starting_before[place].push_back(c);
    last_of_kind[kind] = c;
    earliest = place;
  }

  std::vector<Step> steps;
  std::vector<bool> in_flight(count, false);
  const auto finish = [&](size_t c) {
    if (!in_flight[c]) return;
    steps.push_back({Step::Kind::kDone, c});
    in_flight[c] = false;
  };
  // A collective's results are ready for the step that reads `inputs` once it is done.
  const auto finish_producers = [&](const std::vector<int>& inputs) {
    for (int var : inputs) {
      const std::optional<size_t>& definition = defined_by[static_cast<size_t>(var)];
      if (definition) finish(*definition);
    }
  };
  for (size_t e = 0; e < count; ++e) {
    for (size_t c : starting_before[e]) {
      finish_producers(program.equations[c].inputs);
      if (previous_of_kind[c]) finish(*previous_of_kind[c]);
      steps.push_back({Step::Kind::kStart, c});
      in_flight[c] = true;
    }
    if (!program.equations[e].primitive->kernel) continue;  // started above
    finish_producers(program.equations[e].inputs);
    steps.push_back({Step::Kind::kRun, e});
  }
  for (size_t c = 0; c < count; ++c) finish(c);
  return steps;
}

// How many of the schedule's dones follow their start with no equation run in between: the
// collectives that overlap nothing, where a device must wait for every other device.
inline size_t exposed_collectives(const std::vector<Step>& steps) {
  size_t exposed = 0;
  std::map<size_t, bool> overlapping;  // in-flight collective: whether an equation ran since
  for (const Step& step : steps) {
    switch (step.kind) {
      case Step::Kind::kStart:
        overlapping[step.equation] = false;
        break;
      case Step::Kind::kRun:
        for (auto& [collective, overlaps] : overlapping) overlaps = true;
        break;
      case Step::Kind::kDone:
        if (!overlapping.at(step.equation)) ++exposed;
        overlapping.erase(step.equation);
        break;
    }
  }
  return exposed;
}

}  // namespace pmap_engine::runtime
