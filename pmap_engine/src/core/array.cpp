#include "pmap_engine/array.h"

#include <cstring>

#include "ir/trace.h"
#include "runtime/buffer_pool.h"
#include "runtime/device_blocks.h"

namespace pmap_engine {
namespace {

template <typename T>
Array from_values(DType dtype, Shape shape, const std::vector<T>& values) {
  Buffer buffer = Buffer::allocate_uninitialized(dtype, std::move(shape));  // copied in full
  if (values.size() != buffer.num_elements()) {
    throw EngineError("array of shape " + shape_to_string(buffer.shape) + " needs " +
                      std::to_string(buffer.num_elements()) + " values, got " +
                      std::to_string(values.size()));
  }
  // An empty vector's data() may be null, which memcpy must never get (UBSan), even for 0 bytes.
  if (buffer.num_bytes() > 0) std::memcpy(buffer.bytes->data(), values.data(), buffer.num_bytes());
  return Array(std::move(buffer));
}

// Element i of a buffer of any dtype, as a double.
double element_as_double(const Buffer& buffer, size_t i) {
  switch (buffer.dtype) {
    case DType::f32:
      return buffer.data<float>()[i];
    case DType::f64:
      return buffer.data<double>()[i];
    case DType::bf16:
      return bf16_to_f32(buffer.data<uint16_t>()[i]);
    case DType::f16:
      return f16_to_f32(buffer.data<uint16_t>()[i]);
    case DType::i32:
      return buffer.data<int32_t>()[i];
    case DType::u32:
      return buffer.data<uint32_t>()[i];
    case DType::bool_:
      return buffer.data<uint8_t>()[i];
  }
  return 0;
}

void store_double(Buffer& buffer, size_t i, double value) {
  switch (buffer.dtype) {
    case DType::f32:
      buffer.data<float>()[i] = static_cast<float>(value);
      break;
    case DType::f64:
      buffer.data<double>()[i] = value;
      break;
    case DType::bf16:
      buffer.data<uint16_t>()[i] = f32_to_bf16(static_cast<float>(value));
      break;
    case DType::f16:
      buffer.data<uint16_t>()[i] = f32_to_f16(static_cast<float>(value));
      break;
    case DType::i32:
      buffer.data<int32_t>()[i] = static_cast<int32_t>(value);
      break;
    case DType::u32:
      buffer.data<uint32_t>()[i] = static_cast<uint32_t>(value);
      break;
    case DType::bool_:
      buffer.data<uint8_t>()[i] = value != 0;
      break;
  }
}

}  // namespace

namespace {
// Storage of `num_bytes` from the active pool, or new; zeroed when `zeroed`.
std::shared_ptr<ByteStorage> storage_for(size_t num_bytes, bool zeroed) {
  std::shared_ptr<ByteStorage> storage;
  if (runtime::BufferPool* pool = runtime::BufferPool::active()) {
    storage = pool->take(num_bytes, /*for_overwrite=*/!zeroed);
  }
  if (!storage) storage = std::make_shared<ByteStorage>(num_bytes);
  if (zeroed && num_bytes > 0) std::memset(storage->data(), 0, num_bytes);
  return storage;
}

Buffer allocate_buffer(DType dtype, Shape shape, bool zeroed) {
  Buffer buffer;
  buffer.dtype = dtype;
  buffer.shape = std::move(shape);
  buffer.bytes = storage_for(buffer.num_elements() * dtype_num_bytes(dtype), zeroed);
  return buffer;
}
}  // namespace

Buffer Buffer::allocate(DType dtype, Shape shape) {
  return allocate_buffer(dtype, std::move(shape), /*zeroed=*/true);
}

Buffer Buffer::allocate_uninitialized(DType dtype, Shape shape) {
  return allocate_buffer(dtype, std::move(shape), /*zeroed=*/false);
}

Array::Array(Buffer buffer) : impl_(std::make_shared<Impl>()) {
  impl_->dtype = buffer.dtype;
  impl_->shape = buffer.shape;
  impl_->buffer = std::move(buffer);
}

Array::Array(ir::TraceContext* trace, int var, DType dtype, Shape shape)
    : impl_(std::make_shared<Impl>()) {
  impl_->dtype = dtype;
  impl_->shape = std::move(shape);
  impl_->trace = trace;
  impl_->var = var;
}

Array Array::shape_dtype_struct(Shape shape, DType dtype) {
  Array array;
  array.impl_ = std::make_shared<Impl>();
  array.impl_->dtype = dtype;
  array.impl_->shape = std::move(shape);
  array.impl_->abstract = true;
  return array;
}

Array Array::on_devices(std::shared_ptr<const runtime::DeviceBlocks> blocks, DType dtype,
                        Shape shape) {
  Array array;
  array.impl_ = std::make_shared<Impl>();
  array.impl_->dtype = dtype;
  array.impl_->shape = std::move(shape);
  array.impl_->blocks = std::move(blocks);
  return array;
}

Array Array::from_floats(Shape shape, const std::vector<float>& values) {
  return from_values(DType::f32, std::move(shape), values);
}
Array Array::from_doubles(Shape shape, const std::vector<double>& values) {
  return from_values(DType::f64, std::move(shape), values);
}
Array Array::from_ints(Shape shape, const std::vector<int32_t>& values) {
  return from_values(DType::i32, std::move(shape), values);
}
Array Array::from_uints(Shape shape, const std::vector<uint32_t>& values) {
  return from_values(DType::u32, std::move(shape), values);
}

Array Array::scalar(double value, DType dtype) {
  Buffer buffer = Buffer::allocate(dtype, {});
  store_double(buffer, 0, value);
  return Array(std::move(buffer));
}

const Shape& Array::shape() const {
  if (!impl_) throw EngineError("use of an empty Array (default-constructed, never assigned)");
  return impl_->shape;
}
DType Array::dtype() const {
  if (!impl_) throw EngineError("use of an empty Array (default-constructed, never assigned)");
  return impl_->dtype;
}
bool Array::is_traced() const { return impl_ && impl_->trace != nullptr; }
bool Array::is_shape_dtype_struct() const { return impl_ && impl_->abstract; }
ir::TraceContext* Array::trace() const { return impl_ ? impl_->trace : nullptr; }
int Array::var() const { return impl_ ? impl_->var : -1; }

Buffer Array::donate() {
  Buffer taken = buffer("donation");
  impl_->buffer = Buffer();
  impl_->blocks.reset();
  impl_->deleted = true;
  return taken;
}

void Array::donate_device_blocks() {
  check_concrete("donation");
  impl_->blocks.reset();
  impl_->buffer = Buffer();
  impl_->deleted = true;
}

void Array::check_concrete(const char* what) const {
  if (is_deleted()) {
    throw EngineError(std::string(what) +
                      ": this Array has been deleted: it was donated to a "
                      "jitted function (donate_argnums). Use the function's result instead.");
  }
  if (is_traced()) {
    // JAX's ConcretizationTypeError opens with the same words at both tags (jax-v0.4.38 and
    // jax-v0.11.0 jax/_src/errors.py ConcretizationTypeError.__init__).
    throw EngineError(
        std::string("Abstract tracer value encountered where concrete value is expected: ") +
        what + " needs the value of a traced array " + type_to_string(dtype(), shape()) +
        ". Inside jit or value_and_grad, arrays are tracers: they have a shape and a dtype but "
        "no value until the program runs. To look at a value, use pmap_engine::debug_print; to "
        "branch on an argument, mark it static (JitOptions::static_argnums); or run op by op "
        "with pmap_engine::DisableJit / PE_DISABLE_JIT=1.");
  }
  if (is_shape_dtype_struct()) {
    throw EngineError(std::string(what) + " needs the values of a ShapeDtypeStruct " +
                      type_to_string(dtype(), shape()) +
                      ": it has a shape and a dtype only. Pass it to eval_shape, which traces a "
                      "function on such types without computing anything.");
  }
}

const Buffer& Array::buffer(const char* what) const {
  check_concrete(what);
  return impl_->blocks ? impl_->blocks->global() : impl_->buffer;
}

std::vector<double> Array::to_doubles() const {
  const Buffer& data = buffer("to_doubles()");
  std::vector<double> out(data.num_elements());
  for (size_t i = 0; i < out.size(); ++i) out[i] = element_as_double(data, i);
  return out;
}

std::vector<float> Array::to_floats() const {
  std::vector<double> values = to_doubles();
  return std::vector<float>(values.begin(), values.end());
}

std::vector<int64_t> Array::to_ints() const {
  std::vector<double> values = to_doubles();
  return std::vector<int64_t>(values.begin(), values.end());
}

double Array::item() const {
  const Buffer& data = buffer("item()");
  if (data.num_elements() != 1) {
    throw EngineError("item() needs an array with one element, got " +
                      type_to_string(dtype(), shape()));
  }
  return element_as_double(data, 0);
}

}  // namespace pmap_engine
