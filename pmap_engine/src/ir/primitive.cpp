#include "ir/primitive.h"

#include <map>
#include <memory>

#include "ir/trace.h"
#include "ir/varying_axes.h"

namespace pmap_engine::ir {
namespace {

std::map<std::string, std::unique_ptr<Primitive>>& registry() {
  static std::map<std::string, std::unique_ptr<Primitive>> primitives;
  return primitives;
}

}  // namespace

const Primitive* register_primitive(Primitive primitive) {
  auto& primitives = registry();
  const std::string name = primitive.name;
  if (primitives.count(name)) throw std::logic_error("primitive '" + name + "' registered twice");
  auto stored = std::make_unique<Primitive>(std::move(primitive));
  const Primitive* pointer = stored.get();
  primitives.emplace(name, std::move(stored));
  return pointer;
}

const Primitive& find_primitive(const std::string& name) {
  auto found = registry().find(name);
  if (found == registry().end()) throw std::logic_error("no primitive '" + name + "'");
  return *found->second;
}

std::vector<Array> bind(const Primitive& primitive, const std::vector<Array>& inputs,
                        const Params& params) {
  std::vector<AbstractValue> input_types;
  for (const auto& input : inputs) input_types.push_back({input.dtype(), input.shape()});
  std::vector<AbstractValue> output_types = primitive.abstract_eval(input_types, params);

  // Omnistaging, as in JAX: while a trace is active every op is recorded, even on constants.
  if (TraceContext* trace = TraceContext::current()) {
    return trace->record(primitive, insert_pvary(primitive, params, inputs), params, output_types);
  }
  std::vector<const Buffer*> buffers;
  for (const auto& input : inputs) buffers.push_back(&input.buffer(primitive.name.c_str()));
  std::vector<Buffer> results = primitive.kernel(buffers, params);
  std::vector<Array> outputs;
  for (auto& result : results) outputs.emplace_back(std::move(result));
  return outputs;
}

Array bind1(const Primitive& primitive, const std::vector<Array>& inputs, const Params& params) {
  std::vector<Array> outputs = bind(primitive, inputs, params);
  if (outputs.size() != 1) throw std::logic_error(primitive.name + " has several outputs");
  return outputs.front();
}

}  // namespace pmap_engine::ir
