#include "runtime/executor.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "runtime/buffer_pool.h"

namespace pmap_engine::runtime {
namespace {
thread_local BufferPool* active_pool = nullptr;
}

BufferPool::BufferPool() : previous_(active_pool) { active_pool = this; }
BufferPool::~BufferPool() { active_pool = previous_; }
BufferPool* BufferPool::active() { return active_pool; }

void BufferPool::give(Storage storage, bool donated) {
  if (!storage || storage.use_count() != 1) return;  // someone else still reads it
  const size_t num_bytes = storage->size();
  free_.emplace(num_bytes, std::make_pair(std::move(storage), donated));
}

void BufferPool::offer_in_place(Storage storage, bool donated) {
  in_place_ = std::move(storage);
  in_place_donated_ = donated;
}

void BufferPool::withdraw_in_place() { in_place_ = nullptr; }

BufferPool::Storage BufferPool::take(size_t num_bytes) {
  if (in_place_ && in_place_->size() == num_bytes) {
    if (in_place_donated_) ++donated_reuses_;
    return std::move(in_place_);
  }
  auto found = free_.find(num_bytes);
  if (found == free_.end()) return nullptr;
  Storage storage = std::move(found->second.first);
  if (found->second.second) ++donated_reuses_;
  free_.erase(found);
  std::memset(storage->data(), 0, storage->size());
  return storage;
}

ExecutionResult execute(const ir::Program& program, std::vector<Buffer> inputs,
                        const std::vector<bool>& donated) {
  const size_t num_equations = program.equations.size();
  // Last use of each variable; outputs are read after the last equation.
  std::vector<size_t> last_use(program.vars.size(), 0);
  std::vector<bool> is_read(program.vars.size(), false);
  for (size_t e = 0; e < num_equations; ++e) {
    for (int var : program.equations[e].inputs) {
      last_use[static_cast<size_t>(var)] = e;
      is_read[static_cast<size_t>(var)] = true;
    }
  }
  std::vector<bool> is_output(program.vars.size(), false);
  for (int var : program.outputs) is_output[static_cast<size_t>(var)] = true;

  BufferPool pool;
  std::vector<Buffer> values(program.vars.size());
  std::vector<bool> recyclable(program.vars.size(), false);
  std::vector<bool> from_donation(program.vars.size(), false);
  // Live storage, counted once however many variables share it (an in-place result shares
  // its input's storage).
  std::map<const std::vector<std::byte>*, int> storage_users;
  int64_t live_bytes = 0;
  ExecutionStats stats;
  auto define = [&](int var, Buffer buffer, bool may_recycle, bool donation) {
    const size_t v = static_cast<size_t>(var);
    if (storage_users[buffer.bytes.get()]++ == 0) {
      live_bytes += static_cast<int64_t>(buffer.num_bytes());
      stats.peak_bytes = std::max(stats.peak_bytes, live_bytes);
    }
    values[v] = std::move(buffer);
    recyclable[v] = may_recycle;
    from_donation[v] = donation;
  };
  auto release = [&](int var) {
    const size_t v = static_cast<size_t>(var);
    Buffer& buffer = values[v];
    if (--storage_users[buffer.bytes.get()] == 0) {
      storage_users.erase(buffer.bytes.get());
      live_bytes -= static_cast<int64_t>(buffer.num_bytes());
      if (recyclable[v]) pool.give(std::move(buffer.bytes), from_donation[v]);
    }
    buffer = Buffer();
  };
  auto dies_at = [&](int var, size_t e) {
    const size_t v = static_cast<size_t>(var);
    return values[v].bytes && last_use[v] == e && !is_output[v];
  };
  // An element-wise equation may write its result over an input that dies with it, if
  // nothing else holds that storage.
  auto offer_dying_input = [&](const ir::Equation& equation, size_t e) {
    if (!equation.primitive->elementwise) return;
    for (int var : equation.inputs) {
      const size_t v = static_cast<size_t>(var);
      if (dies_at(var, e) && recyclable[v] && storage_users[values[v].bytes.get()] == 1 &&
          values[v].bytes.use_count() == 1) {
        pool.offer_in_place(values[v].bytes, from_donation[v]);
        return;
      }
    }
  };

  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const bool give_up = i < donated.size() && donated[i];
    define(program.inputs[i], std::move(inputs.at(i)), give_up, give_up);
  }
  for (size_t i = 0; i < program.constants.size(); ++i) {
    define(program.constants[i], program.constant_values[i], false, false);
  }

  for (size_t e = 0; e < num_equations; ++e) {
    const ir::Equation& equation = program.equations[e];
    std::vector<const Buffer*> operands;
    for (int var : equation.inputs) operands.push_back(&values[static_cast<size_t>(var)]);
    offer_dying_input(equation, e);
    std::vector<Buffer> results = equation.primitive->kernel(operands, equation.params);
    pool.withdraw_in_place();
    for (size_t o = 0; o < results.size(); ++o) {
      define(equation.outputs[o], std::move(results[o]), true, false);
    }
    for (int var : equation.inputs) {
      if (dies_at(var, e)) release(var);
    }
    // Results nobody reads die at once.
    for (int var : equation.outputs) {
      if (!is_read[static_cast<size_t>(var)] && !is_output[static_cast<size_t>(var)]) release(var);
    }
  }
  stats.num_ops = static_cast<int64_t>(num_equations);
  stats.donated_reuses = pool.donated_reuses();

  ExecutionResult result;
  for (int var : program.outputs) result.outputs.push_back(values[static_cast<size_t>(var)]);
  result.stats = stats;
  return result;
}

}  // namespace pmap_engine::runtime
