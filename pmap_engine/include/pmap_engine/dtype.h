// Element types and shapes of the engine, named as JAX prints them in a jaxpr (f32, bf16, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace pmap_engine {

enum class DType { f32, f64, bf16, f16, i32, u32, bool_ };

using Shape = std::vector<int64_t>;

size_t dtype_num_bytes(DType dtype);
const char* dtype_name(DType dtype);  // "f32", "bf16", "bool", ...
bool is_floating(DType dtype);

size_t shape_num_elements(const Shape& shape);
std::string shape_to_string(const Shape& shape);       // "[784,256]"
std::string python_tuple(const Shape& values);         // "(784, 256)", "(10,)", "()" as JAX prints
std::string type_to_string(DType dtype, const Shape& shape);  // "f32[784,256]"

// bf16 and f16 are stored as 16-bit patterns and computed in f32 (round to nearest even).
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

// Raised for misuse a JAX user would get a TypeError/ValueError for: shape or dtype mismatches,
// unbound axis names, using a traced value as a concrete one. The message names the op, both
// operands' types, and the fix.
class EngineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace pmap_engine
