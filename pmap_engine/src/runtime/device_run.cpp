#include "runtime/device_run.h"

#include <algorithm>

namespace pmap_engine::runtime {

Liveness::Liveness(const ir::Program& program)
    : last_use(program.vars.size(), 0),
      is_read(program.vars.size(), false),
      is_output(program.vars.size(), false) {
  for (size_t e = 0; e < program.equations.size(); ++e) {
    for (int var : program.equations[e].inputs) {
      last_use[static_cast<size_t>(var)] = e;
      is_read[static_cast<size_t>(var)] = true;
    }
  }
  for (int var : program.outputs) is_output[static_cast<size_t>(var)] = true;
  for (size_t e = 0; e < program.equations.size(); ++e) {
    for (int var : program.equations[e].outputs) {
      const ir::AbstractValue& value = program.vars[static_cast<size_t>(var)];
      results_of_size[shape_num_elements(value.shape) * dtype_num_bytes(value.dtype)].push_back(e);
    }
  }
}

size_t Liveness::results_after(size_t num_bytes, size_t e) const {
  auto found = results_of_size.find(num_bytes);
  if (found == results_of_size.end()) return 0;
  const std::vector<size_t>& at = found->second;
  return static_cast<size_t>(at.end() - std::upper_bound(at.begin(), at.end(), e));
}

DeviceRun::DeviceRun(const ir::Program& program, const Liveness& liveness)
    : program_(program),
      liveness_(liveness),
      values_(program.vars.size()),
      recyclable_(program.vars.size(), false),
      from_donation_(program.vars.size(), false) {}

void DeviceRun::define(int var, Buffer buffer, bool may_recycle, bool donation) {
  const size_t v = static_cast<size_t>(var);
  if (storage_users_[buffer.bytes.get()]++ == 0) {
    live_bytes_ += static_cast<int64_t>(buffer.num_bytes());
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    peak_footprint_ =
        std::max(peak_footprint_, live_bytes_ + static_cast<int64_t>(pool_.held_bytes()));
  }
  values_[v] = std::move(buffer);
  recyclable_[v] = may_recycle;
  from_donation_[v] = donation;
}

// `e`: the equation after which `var` dies; its storage is kept for reuse only while the pool
// holds fewer of that size than the results still to come.
void DeviceRun::release(int var, size_t e) {
  const size_t v = static_cast<size_t>(var);
  Buffer& buffer = values_[v];
  if (--storage_users_[buffer.bytes.get()] == 0) {
    storage_users_.erase(buffer.bytes.get());
    live_bytes_ -= static_cast<int64_t>(buffer.num_bytes());
    if (recyclable_[v] && pool_.count(buffer.num_bytes()) <
                              liveness_.results_after(buffer.num_bytes(), e)) {
      pool_.give(std::move(buffer.bytes), from_donation_[v]);
    }
  }
  buffer = Buffer();
}

bool DeviceRun::dies_at(int var, size_t e) const {
  const size_t v = static_cast<size_t>(var);
  return values_[v].bytes && liveness_.last_use[v] == e && !liveness_.is_output[v];
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
void DeviceRun::offer_dying_input(size_t e) {
  const ir::Equation& equation = program_.equations[e];
  if (!equation.primitive->elementwise) return;
  for (int var : equation.inputs) {
    const size_t v = static_cast<size_t>(var);
    if (dies_at(var, e) && recyclable_[v] && storage_users_.at(values_[v].bytes.get()) == 1 &&
        values_[v].bytes.use_count() == 1) {
      pool_.offer_in_place(values_[v].bytes, from_donation_[v]);
      return;
    }
  }
}

void DeviceRun::run(size_t e) {
  const ir::Equation& equation = program_.equations[e];
  BufferPool::Active active(pool_);
  offer_dying_input(e);
  std::vector<Buffer> results = equation.primitive->kernel(operands(e), equation.params);
  pool_.withdraw_in_place();
  finish(e, std::move(results));
}

void DeviceRun::finish(size_t e, std::vector<Buffer> results) {
  const ir::Equation& equation = program_.equations[e];
  for (size_t o = 0; o < results.size(); ++o) {
    define(equation.outputs[o], std::move(results[o]), true, false);
  }
  for (int var : equation.inputs) {
    if (dies_at(var, e)) release(var, e);
  }
  // Results nobody reads die at once.
  for (int var : equation.outputs) {
    const size_t v = static_cast<size_t>(var);
    if (!liveness_.is_read[v] && !liveness_.is_output[v]) release(var, e);
  }
}

std::vector<Buffer> DeviceRun::outputs() const {
  std::vector<Buffer> out;
  for (int var : program_.outputs) out.push_back(values_[static_cast<size_t>(var)]);
  return out;
}

}  // namespace pmap_engine::runtime
