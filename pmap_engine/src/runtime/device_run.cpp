#include "runtime/device_run.h"

#include <algorithm>
#include <optional>

namespace pmap_engine::runtime {
namespace {

size_t value_bytes(const ir::AbstractValue& value) {
  return static_cast<size_t>(shape_num_elements(value.shape)) * dtype_num_bytes(value.dtype);
}

// The bytes a collective's results take on one device, reserved from its start to its done.
int64_t result_bytes(const ir::Program& program, size_t e) {
  int64_t bytes = 0;
  for (int var : program.equations[e].outputs) {
    bytes += static_cast<int64_t>(value_bytes(program.vars[static_cast<size_t>(var)]));
  }
  return bytes;
}

}  // namespace

Liveness::Liveness(const ir::Program& program, std::vector<Step> schedule)
    : steps(std::move(schedule)),
      last_use(program.vars.size(), 0),
      is_output(program.vars.size(), false),
      dying_after(steps.size()) {
  std::vector<bool> is_read(program.vars.size(), false);
  std::vector<std::optional<size_t>> defined_at(program.vars.size());  // results only
  for (size_t s = 0; s < steps.size(); ++s) {
    const ir::Equation& equation = program.equations[steps[s].equation];
    // Every step of an equation reads its inputs: a collective's, from start to done.
    for (int var : equation.inputs) {
      last_use[static_cast<size_t>(var)] = s;
      is_read[static_cast<size_t>(var)] = true;
    }
    if (steps[s].kind == Step::Kind::kStart) continue;  // results defined at the done
    for (int var : equation.outputs) {
      defined_at[static_cast<size_t>(var)] = s;
      results_of_size[value_bytes(program.vars[static_cast<size_t>(var)])].push_back(s);
    }
  }
  for (int var : program.outputs) is_output[static_cast<size_t>(var)] = true;
  for (size_t v = 0; v < program.vars.size(); ++v) {
    if (is_output[v]) continue;
    if (is_read[v]) {
      dying_after[last_use[v]].push_back(static_cast<int>(v));
    } else if (defined_at[v]) {  // a result nobody reads dies at once
      last_use[v] = *defined_at[v];
      dying_after[*defined_at[v]].push_back(static_cast<int>(v));
    }
  }
}

size_t Liveness::results_after(size_t num_bytes, size_t s) const {
  auto found = results_of_size.find(num_bytes);
  if (found == results_of_size.end()) return 0;
  const std::vector<size_t>& at = found->second;
  return static_cast<size_t>(at.end() - std::upper_bound(at.begin(), at.end(), s));
}

DeviceRun::DeviceRun(const ir::Program& program, const Liveness& liveness)
    : program_(program),
      liveness_(liveness),
      values_(program.vars.size()),
      recyclable_(program.vars.size(), false),
      from_donation_(program.vars.size(), false) {}

void DeviceRun::count_live(int64_t bytes) {
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  peak_footprint_ =
      std::max(peak_footprint_, live_bytes_ + static_cast<int64_t>(pool_.held_bytes()));
}

void DeviceRun::define(int var, Buffer buffer, bool may_recycle, bool donation) {
  const size_t v = static_cast<size_t>(var);
  if (storage_users_[buffer.bytes.get()]++ == 0) {
    count_live(static_cast<int64_t>(buffer.num_bytes()));
  }
  values_[v] = std::move(buffer);
  recyclable_[v] = may_recycle;
  from_donation_[v] = donation;
}

// `s`: the step after which `var` dies; its storage is kept for reuse only while the pool
// holds fewer of that size than the results still to come.
void DeviceRun::release(int var, size_t s) {
  const size_t v = static_cast<size_t>(var);
  Buffer& buffer = values_[v];
  if (--storage_users_[buffer.bytes.get()] == 0) {
    storage_users_.erase(buffer.bytes.get());
    live_bytes_ -= static_cast<int64_t>(buffer.num_bytes());
    if (recyclable_[v] && pool_.count(buffer.num_bytes()) <
                              liveness_.results_after(buffer.num_bytes(), s)) {
      pool_.give(std::move(buffer.bytes), from_donation_[v]);
    }
  }
  buffer = Buffer();
}

void DeviceRun::release_dying(size_t s) {
  for (int var : liveness_.dying_after[s]) {
    if (values_[static_cast<size_t>(var)].bytes) release(var, s);
  }
}

bool DeviceRun::dies_at(int var, size_t s) const {
  const size_t v = static_cast<size_t>(var);
  return values_[v].bytes && liveness_.last_use[v] == s && !liveness_.is_output[v];
}

void DeviceRun::bind_inputs(std::vector<Buffer> inputs, const std::vector<bool>& donated) {
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    const bool give_up = i < donated.size() && donated[i];
    define(program_.inputs[i], std::move(inputs.at(i)), give_up, give_up);
  }
  for (size_t i = 0; i < program_.constants.size(); ++i) {
    define(program_.constants[i], program_.constant_values[i], false, false);
  }
}

std::vector<const Buffer*> DeviceRun::operands(size_t e) const {
  std::vector<const Buffer*> buffers;
  for (int var : program_.equations[e].inputs)
    buffers.push_back(&values_[static_cast<size_t>(var)]);
  return buffers;
}

// An element-wise equation may write its result over an input that dies with it, if nothing
// else holds that storage.
void DeviceRun::offer_dying_input(size_t s) {
  const ir::Equation& equation = program_.equations[liveness_.steps[s].equation];
  if (!equation.primitive->elementwise) return;
  for (int var : equation.inputs) {
    const size_t v = static_cast<size_t>(var);
    if (dies_at(var, s) && recyclable_[v] && storage_users_.at(values_[v].bytes.get()) == 1 &&
        values_[v].bytes.use_count() == 1) {
      pool_.offer_in_place(values_[v].bytes, from_donation_[v]);
      return;
    }
  }
}

void DeviceRun::run(size_t s) {
  const size_t e = liveness_.steps[s].equation;
  const ir::Equation& equation = program_.equations[e];
  BufferPool::Active active(pool_);
  offer_dying_input(s);
  std::vector<Buffer> results = equation.primitive->kernel(operands(e), equation.params);
  pool_.withdraw_in_place();
  for (size_t o = 0; o < results.size(); ++o) {
    define(equation.outputs[o], std::move(results[o]), true, false);
  }
  release_dying(s);
}

std::vector<const Buffer*> DeviceRun::start(size_t s) {
  const size_t e = liveness_.steps[s].equation;
  count_live(result_bytes(program_, e));
  return operands(e);  // nothing dies here: the done reads them too
}

void DeviceRun::done(size_t s, std::vector<Buffer> results) {
  const size_t e = liveness_.steps[s].equation;
  live_bytes_ -= result_bytes(program_, e);  // the reservation becomes the results
  for (size_t o = 0; o < results.size(); ++o) {
    define(program_.equations[e].outputs[o], std::move(results[o]), true, false);
  }
  release_dying(s);
}

std::vector<Buffer> DeviceRun::outputs() const {
  std::vector<Buffer> out;
  for (int var : program_.outputs) out.push_back(values_[static_cast<size_t>(var)]);
  return out;
}

}  // namespace pmap_engine::runtime
